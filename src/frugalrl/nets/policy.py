"""The actor-critic used by PPO, and the self-contained policy that gets exported."""

from __future__ import annotations

from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from frugalrl.config import PolicyConfig
from frugalrl.errors import FrugalError
from frugalrl.nets.heads import CategoricalHead, GaussianHead
from frugalrl.nets.torsos import MLP, NatureCNN, default_init, orthogonal_init


def _is_image(space: gym.spaces.Box) -> bool:
    return space.dtype == np.uint8 and len(space.shape) == 3


class ActOutput(NamedTuple):
    action: torch.Tensor  # (B,) or (B, act_dim)
    logprob: torch.Tensor  # (B,)
    value: torch.Tensor  # (B,)
    dist_params: torch.Tensor  # (B, P): log-probabilities, or mean and log-std


class InputStandardiser(nn.Module):
    """A fixed per-feature standardisation of a policy's input: ``(x - mean) / scale``, clipped.

    Why: a frozen encoder's latents vary little from one state to the next (per-dimension spread
    0.02-0.12 on Atari, docs/benchmarks.md), so an MLP fed them raw sees nearly constant inputs; this puts
    them at unit spread (``latent.policy_input: standardised``; on Breakout it did not change the score,
    docs/latent.md). The statistics are fixed when the policy is built, not running: the same input always
    gives the same action, and they travel inside the exported policy to any client.
    """

    def __init__(self, mean: torch.Tensor, scale: torch.Tensor, clip: float = 10.0):
        super().__init__()
        self.register_buffer("mean", mean.detach().float().clone())
        self.register_buffer("scale", scale.detach().float().clone())
        self.clip = clip

    @classmethod
    def fit(cls, samples: torch.Tensor, min_scale: float = 1e-3, clip: float = 10.0) -> InputStandardiser:
        """Mean and standard deviation of ``samples`` (N, D); a feature that barely moves gets ``min_scale``."""
        flat = samples.detach().float().reshape(len(samples), -1)
        return cls(flat.mean(0), flat.std(0).clamp_min(min_scale), clip)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return ((obs - self.mean) / self.scale).clamp(-self.clip, self.clip)


class ActorCritic(nn.Module):
    """Policy and value function.

    MLP policies keep separate actor and critic torsos (as Stable-Baselines3 does); CNN
    policies share one torso, since the convolutions dominate the cost. ``input_norm`` (optional)
    standardises the observations before both torsos see them.
    """

    def __init__(
        self,
        actor: nn.Module,
        critic: nn.Module | None,
        head: nn.Module,
        feature_dim: int,
        input_norm: InputStandardiser | None = None,
    ):
        super().__init__()
        self.actor = actor
        self.critic = critic  # None: the critic reads the actor's features
        self.head = head
        self.value = orthogonal_init(nn.Linear(feature_dim, 1), gain=1.0)
        self.discrete = isinstance(head, CategoricalHead)
        self.input_norm = input_norm

    def standardise(self, obs: torch.Tensor) -> torch.Tensor:
        """What the torsos read: ``obs``, standardised where the policy has an ``input_norm``."""
        return obs if self.input_norm is None else self.input_norm(obs)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, *obs_shape) -> distribution parameters (B, P) and values (B,)."""
        obs = self.standardise(obs)
        features = self.actor(obs)
        critic_features = features if self.critic is None else self.critic(obs)
        return self.head(features), self.value(critic_features).squeeze(-1)

    def get_value(self, obs: torch.Tensor) -> torch.Tensor:
        obs = self.standardise(obs)
        features = self.actor(obs) if self.critic is None else self.critic(obs)
        return self.value(features).squeeze(-1)

    def act(self, obs: torch.Tensor, deterministic: bool = False) -> ActOutput:
        """Sample (or take the mode of) an action: action, log-prob, value and distribution parameters."""
        params, value = self(obs)
        action = self.head.mode(params) if deterministic else self.head.sample(params)
        return ActOutput(action, self.head.log_prob(params, action), value, params)

    def evaluate(self, obs: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Log-prob and entropy of given actions, and values: what the PPO loss needs."""
        params, value = self(obs)
        return self.head.log_prob(params, actions), self.head.entropy(params), value


def build_actor_critic(
    obs_space: gym.spaces.Box,
    action_space: gym.Space,
    config: PolicyConfig,
    input_norm: InputStandardiser | None = None,
) -> ActorCritic:
    """Pick torso and head from the spaces: CNN for uint8 images, Gaussian for Box actions."""
    kind = config.kind
    if kind == "auto":
        kind = "cnn" if _is_image(obs_space) else "mlp"
    if kind == "cnn":
        if len(obs_space.shape) != 3:
            raise ValueError(f"policy.kind = cnn needs (C, H, W) image observations, got shape {obs_space.shape}")
        actor: nn.Module = NatureCNN(obs_space.shape[0], obs_space.shape[1], block=config.block)
        critic = None
    else:
        in_dim = int(np.prod(obs_space.shape))
        actor = MLP(in_dim, config.hidden, config.activation, config.block)
        critic = MLP(in_dim, config.hidden, config.activation, config.block)
    if isinstance(action_space, gym.spaces.Discrete):
        head: nn.Module = CategoricalHead(actor.out_dim, int(action_space.n))
    elif isinstance(action_space, gym.spaces.Box):
        head = GaussianHead(actor.out_dim, int(np.prod(action_space.shape)), config.log_std_init)
    else:
        raise ValueError(f"unsupported action space {action_space}; allowed: Discrete or Box")
    network = ActorCritic(actor, critic, head, actor.out_dim, input_norm)
    return network if config.ortho_init else default_init(network)


class ExportedPolicy(nn.Module):
    """A trained policy with its observation normalisation, ready to act on raw observations.

    This is what goes to the MLflow registry: ``forward(obs)`` returns the deterministic
    action, ``act(obs, deterministic=False)`` samples. ``spec`` records the env config the
    policy was trained on, so an evaluator can rebuild the same preprocessing. ``predict`` acts on
    NumPy observations, one or a batch; it needs the spaces, which ``policy_store`` sets on every
    policy it loads (``set_spaces``). They are plain tuples and arrays: a logged model still unpickles
    with torch and numpy alone.
    """

    def __init__(
        self,
        actor_critic: ActorCritic,
        spec: dict[str, Any],
        obs_mean: torch.Tensor | None = None,
        obs_var: torch.Tensor | None = None,
        clip_obs: float = 10.0,
        encoder: nn.Module | None = None,
    ):
        super().__init__()
        self.actor_critic = actor_critic
        self.encoder = encoder  # latent-curriculum policies act on the latent of their frozen encoder
        self.spec = spec
        self.normalize = obs_mean is not None
        self.clip_obs = clip_obs
        self.register_buffer("obs_mean", obs_mean if obs_mean is not None else torch.zeros(0))
        self.register_buffer("obs_var", obs_var if obs_var is not None else torch.zeros(0))
        self.observation_shape: tuple[int, ...] | None = None  # set_spaces: what predict reads
        self.action_bounds: tuple[np.ndarray, np.ndarray] | None = None  # continuous actions: low, high

    def preprocess(self, obs: torch.Tensor) -> torch.Tensor:
        if self.encoder is not None:
            return self.encoder(obs)
        if not self.normalize:
            return obs
        scaled = (obs.double() - self.obs_mean) / torch.sqrt(self.obs_var + 1e-8)
        return scaled.clamp(-self.clip_obs, self.clip_obs).float()

    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        return self.actor_critic.act(self.preprocess(obs), deterministic=deterministic).action

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.act(obs, deterministic=True)

    def set_spaces(self, observation_space: gym.Space, action_space: gym.Space) -> ExportedPolicy:
        """Remember the env's observation shape (and a continuous action space's bounds) for ``predict``."""
        self.observation_shape = tuple(int(n) for n in observation_space.shape or ())
        box = isinstance(action_space, gym.spaces.Box)
        self.action_bounds = (np.asarray(action_space.low), np.asarray(action_space.high)) if box else None
        return self

    def predict(self, obs: np.ndarray | torch.Tensor, deterministic: bool = True) -> np.ndarray:
        """The action for one observation, or the actions for a batch, as NumPy (Stable-Baselines3's
        ``model.predict``, but the action alone, without a recurrent state). ``obs`` is NumPy, a tensor or a
        nested list; one observation (the env's observation shape) gives one action, ``(n, *shape)`` gives
        ``n``. Continuous actions are clipped to the action space, as evaluation does."""
        shape = getattr(self, "observation_shape", None)  # a policy pickled before predict existed has none
        if shape is None:
            raise FrugalError(
                "this policy does not know its observation shape (it was built in memory); "
                "load it with frugalrl.load_policy(RUN_DIR or models:/NAME@ALIAS) to use predict"
            )
        x = obs.detach().cpu().numpy() if isinstance(obs, torch.Tensor) else np.asarray(obs)
        single = x.shape == shape
        if not single and x.shape[1:] != shape:
            raise FrugalError(
                f"predict: observation shape {x.shape} fits neither one observation {shape} "
                f"nor a batch (n, {', '.join(map(str, shape))}) of this policy"
            )
        if x.dtype == np.float64:
            x = x.astype(np.float32)  # what the env's float32 space holds (MuJoCo gives float64)
        batch = torch.as_tensor(x[None] if single else x, device=next(self.parameters()).device)
        with torch.inference_mode():
            actions = self.act(batch, deterministic=deterministic).cpu().numpy()
        bounds = getattr(self, "action_bounds", None)
        if bounds is not None:
            actions = np.clip(actions, *bounds)
        return actions[0, ...] if single else actions
