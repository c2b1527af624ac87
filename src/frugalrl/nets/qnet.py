"""Q-networks for DQN, with the same acting interface as the actor-critic (``act`` -> ``ActOutput``)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from frugalrl.config import PolicyConfig
from frugalrl.nets.policy import ActOutput, _is_image
from frugalrl.nets.torsos import MLP, NatureCNN, default_init


class QNetwork(nn.Module):
    """obs -> one value per discrete action. Greedy (deterministic) or softmax-free argmax acting."""

    discrete = True

    def __init__(self, torso: nn.Module, num_actions: int):
        super().__init__()
        self.torso = torso
        self.q = nn.Linear(torso.out_dim, num_actions)
        self.num_actions = num_actions

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.q(self.torso(obs))  # (B, A)

    def act(self, obs: torch.Tensor, deterministic: bool = True) -> ActOutput:
        """The greedy action (exploration is the learner's job, not the exported policy's)."""
        q = self(obs)
        action = q.argmax(-1)
        zeros = q.new_zeros(q.shape[0])  # the batch size stays symbolic in torch.export
        return ActOutput(action, zeros, q.max(-1).values, q)


def build_q_network(obs_space: gym.spaces.Box, action_space: gym.Space, config: PolicyConfig) -> QNetwork:
    if not isinstance(action_space, gym.spaces.Discrete):
        raise ValueError(f"DQN needs a discrete action space, got {action_space}; use algo ppo (or sac) instead")
    kind = config.kind
    if kind == "auto":
        kind = "cnn" if _is_image(obs_space) else "mlp"
    if kind == "cnn":
        torso: nn.Module = NatureCNN(obs_space.shape[0], obs_space.shape[1], block=config.block)
    else:
        torso = MLP(int(np.prod(obs_space.shape)), config.hidden, config.activation, config.block)
    network = QNetwork(torso, int(action_space.n))
    return network if config.ortho_init else default_init(network)
