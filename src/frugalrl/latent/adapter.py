"""LoRA on the encoder during the real stage: the policy loss adapts the encoder, cheaply.

While imagined rollouts are in the mix, the encoder must stay fixed (the world model was fit
on its latents). Once the curriculum reaches an all-real stage, ``encoder_adapter: lora`` puts
low-rank adapters (the ``peft`` library) on the encoder's convolutions and linear layer, and
the real learner trains them together with the actor-critic through the PPO loss. The exported
policy carries the encoder with the adapters merged in, so it loads as a plain encoder.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from frugalrl.latent.encoder import FrameEncoder
from frugalrl.nets.policy import ActorCritic, ActOutput

LORA_TARGETS = ["convs.0", "convs.2", "convs.4", "fc"]


def lora_encoder(encoder: FrameEncoder, rank: int, alpha: float) -> nn.Module:
    """A copy of ``encoder`` with LoRA adapters; only the adapters are trainable."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=rank, lora_alpha=alpha, target_modules=LORA_TARGETS, lora_dropout=0.0)
    return get_peft_model(copy.deepcopy(encoder).train(), config)


def merged_encoder(adapted: nn.Module) -> FrameEncoder:
    """The adapted encoder with its LoRA weights folded in (a plain ``FrameEncoder``)."""
    return copy.deepcopy(adapted).merge_and_unload()


def trainable_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


class EncodedActorCritic(nn.Module):
    """The shared actor-critic on a trainable encoder: PPO's policy interface, on frames."""

    def __init__(self, encoder: nn.Module, heads: ActorCritic):
        super().__init__()
        self.encoder = encoder
        self.heads = heads
        self.discrete = heads.discrete

    def act(self, obs: torch.Tensor, deterministic: bool = False) -> ActOutput:
        return self.heads.act(self.encoder(obs), deterministic)

    def evaluate(self, obs: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.heads.evaluate(self.encoder(obs), actions)

    def get_value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.heads.get_value(self.encoder(obs))
