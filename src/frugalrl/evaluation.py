"""Policy evaluation: N episodes over fixed seeds, with mean, std, IQM and a bootstrap CI.

The evaluation env is the training env without its learning aids: raw rewards, and for Atari
whole games (all lives; ``LifeLossSignal`` is a training wrapper only), so a score is what the
field reports (``scoring_protocol``).

Episode ``i`` always starts from seed ``seed + i``, so two policies evaluated with the same
seeds face the same initial states, and a re-run reproduces the figures exactly on CPU.
Episodes run ``batch`` at a time in one vector env; each env's first episode counts and
whatever it plays after that is discarded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from frugalrl.config import EnvConfig
from frugalrl.envs.factory import make_vec_env
from frugalrl.envs.registry import is_atari
from frugalrl.nets.policy import ExportedPolicy
from frugalrl.stats import bootstrap_ci, interquartile_mean


@dataclass
class EvalResult:
    returns: list[float]
    lengths: list[int]
    mean: float
    std: float
    iqm: float
    ci_low: float
    ci_high: float

    @classmethod
    def from_returns(cls, returns: list[float], lengths: list[int]) -> EvalResult:
        values = np.asarray(returns, dtype=np.float64)
        low, high = bootstrap_ci(values)
        return cls(
            returns=[float(r) for r in returns],
            lengths=[int(n) for n in lengths],
            mean=float(values.mean()),
            std=float(values.std()),
            iqm=interquartile_mean(values),
            ci_low=low,
            ci_high=high,
        )

    def metrics(self, prefix: str = "eval_") -> dict[str, float]:
        """The run-contract keys: eval_mean, eval_std, eval_iqm, eval_ci_low, eval_ci_high, eval_episodes."""
        data = asdict(self)
        out = {f"{prefix}{key}": data[key] for key in ("mean", "std", "iqm", "ci_low", "ci_high")}
        out[f"{prefix}episodes"] = len(self.returns)
        return out


MIN_ATARI_EPISODES = 30  # published Atari scores average at least this many full games


def scoring_protocol(env_config: EnvConfig) -> str | None:
    """Atari: ``full-game`` when evaluation follows the published protocol (all lives, sticky
    actions 0.25, games cut at 108,000 frames, no FIRE convention), else what differs; ``None`` elsewhere."""
    if not is_atari(env_config.id):
        return None
    deviations = env_config.atari.protocol_deviations()
    return "full-game" + (f" ({'; '.join(deviations)})" if deviations else "")


def protocol_note(env_config: EnvConfig, episodes: int) -> str | None:
    """One line when an Atari score would not be comparable with published ones; ``None`` when it is."""
    if not is_atari(env_config.id):
        return None
    problems = env_config.atari.protocol_deviations()
    if episodes < MIN_ATARI_EPISODES:
        problems.append(f"eval.episodes {episodes} (published scores: at least {MIN_ATARI_EPISODES} full games)")
    if not problems:
        return None
    return f"note: {env_config.id} scores are not comparable with published full-game scores: {'; '.join(problems)}"


Actor = Callable[[np.ndarray, Any], np.ndarray]  # (observations, the vector env) -> actions


@torch.inference_mode()
def play_episodes(act: Actor, env_config: EnvConfig, episodes: int, seed: int, batch: int = 10) -> EvalResult:
    """Play ``episodes`` episodes with ``act`` (episode i from seed ``seed + i``) and summarise the returns."""
    returns: list[float] = []
    lengths: list[int] = []
    for first in range(0, episodes, batch):
        n = min(batch, episodes - first)
        env = make_vec_env(env_config, num_envs=n, training=False)
        try:
            obs, _ = env.reset(seed=seed + first)
            env.action_space.seed(seed + first)  # the random policy's draws repeat too
            finished = np.zeros(n, dtype=bool)
            chunk_returns = np.zeros(n)
            chunk_lengths = np.zeros(n, dtype=np.int64)
            while not finished.all():
                obs, _, _, _, info = env.step(act(obs, env))
                if "_episode" in info:
                    newly = info["_episode"] & ~finished
                    chunk_returns[newly] = info["episode"]["r"][newly]
                    chunk_lengths[newly] = info["episode"]["l"][newly]
                    finished |= newly
        finally:
            env.close()
        returns.extend(chunk_returns.tolist())
        lengths.extend(chunk_lengths.tolist())
    return EvalResult.from_returns(returns, lengths)


def evaluate_policy(
    policy: ExportedPolicy,
    env_config: EnvConfig,
    episodes: int = 20,
    seed: int = 10_000,
    deterministic: bool = True,
    batch: int = 10,
    device: torch.device | str = "cpu",
) -> EvalResult:
    """Play ``episodes`` episodes (episode i from seed ``seed + i``) and summarise the returns."""
    policy = policy.to(device).eval()

    def act(obs: np.ndarray, env: Any) -> np.ndarray:
        obs = obs.astype(np.float32) if obs.dtype == np.float64 else obs  # MuJoCo gives float64
        action = policy.act(torch.as_tensor(obs, device=device), deterministic=deterministic).cpu().numpy()
        if not policy.actor_critic.discrete:
            space = env.single_action_space
            action = np.clip(action, space.low, space.high)
        return action

    return play_episodes(act, env_config, episodes, seed, batch)


def random_policy_returns(env_config: EnvConfig, episodes: int = 20, seed: int = 10_000, batch: int = 10) -> EvalResult:
    """The uniform random policy on the same episodes and seeds as ``evaluate_policy``: the floor to beat."""
    return play_episodes(lambda obs, env: env.action_space.sample(), env_config, episodes, seed, batch)
