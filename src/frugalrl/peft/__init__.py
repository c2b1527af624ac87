"""Parameter-efficient fine-tuning of a pretrained policy for a changed task (``frugalrl peft``)."""

from frugalrl.peft.methods import METHODS, Adaptation, adapt, trainable_state

__all__ = ["METHODS", "Adaptation", "adapt", "trainable_state"]
