"""Parameter-efficient fine-tuning of a pretrained policy for a changed task (``frugalrl peft``)."""

from frugalrl.peft.methods import PEFT_METHODS, Adaptation, adapt, method_names, trainable_state

__all__ = ["PEFT_METHODS", "Adaptation", "adapt", "method_names", "trainable_state"]
