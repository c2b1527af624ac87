"""What the off-policy benchmarks against Stable-Baselines3 share: the envs they run, the overrides of the
frugalrl side, and the mapping from a frugalrl config to the SB3 learner that trains the same algorithm
(``offpolicy_vs_sb3`` for whole runs, ``offpolicy_step_floor`` for single gradient steps)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import _sb3

SB3_LOG_STD_BOUNDS = (-20.0, 2.0)  # stable_baselines3.sac.policies LOG_STD_MIN / LOG_STD_MAX


@dataclass(frozen=True)
class EnvSpec:
    env_id: str
    algo: str  # "sac" or "dqn"
    config: str  # relative to the repository root
    timesteps: int  # default budget
    seeds: int  # default number of seeds
    eval_episodes: int
    section: str  # docs/benchmarks.md section name


ENVS = {
    spec.env_id: spec
    for spec in (
        EnvSpec("Pendulum-v1", "sac", "configs/pendulum-sac.yaml", 20_000, 5, 20, "offpolicy_vs_sb3_pendulum"),
        EnvSpec(
            "HalfCheetah-v5", "sac", "configs/halfcheetah-sac.yaml", 100_000, 3, 10, "offpolicy_vs_sb3_halfcheetah"
        ),
        EnvSpec("CartPole-v1", "dqn", "configs/cartpole-dqn.yaml", 50_000, 5, 20, "offpolicy_vs_sb3_cartpole"),
        EnvSpec(
            "LunarLander-v3", "dqn", "configs/lunarlander-dqn.yaml", 100_000, 5, 20, "offpolicy_vs_sb3_lunarlander"
        ),
    )
}


def frugalrl_overrides(spec: EnvSpec, seed: int, timesteps: int) -> list[str]:
    return [
        "tracking.enabled=false",
        f"seed={seed}",
        f"{spec.algo}.total_timesteps={timesteps}",
        "threads=1",
        f"eval.episodes={spec.eval_episodes}",
        f"eval.seed={_sb3.EVAL_SEED}",
        "eval.deterministic=true",
        *(["dqn.double=false"] if spec.algo == "dqn" else []),  # plain DQN, as SB3's
    ]


# --------------------------------------------------------------------------- config -> SB3
def sb3_settings(cfg: Any) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The SB3 class (``"SAC"`` or ``"DQN"``) and its keyword arguments that train what the frugalrl config
    ``cfg`` trains, and a JSON-able description of them (``n_envs`` first).

    Raises ``ValueError`` for settings SB3 has no counterpart for, instead of training something else.
    """
    from torch import nn

    algo = cfg.algo if cfg.algo in ("sac", "dqn") else "sac or dqn"
    env, pol, replay = cfg.env, cfg.policy, cfg.replay
    problems = _sb3.refusals(cfg, algo)
    if env.imports:
        problems.append(f"env.imports {env.imports}")
    if env.normalize_obs or env.normalize_reward or env.clip_reward is not None:
        problems.append("env.normalize_obs / normalize_reward / clip_reward")
    if pol.ortho_init:
        problems.append("policy.ortho_init (SB3's off-policy networks use PyTorch's default init)")
    if replay.kind != "uniform" or replay.settings or replay.max_bytes is not None:
        problems.append(f"replay kind {replay.kind} / settings {replay.settings} / max_bytes {replay.max_bytes}")
    if cfg.eval.every_steps:
        problems.append("eval.every_steps (evaluations during training)")
    if cfg.cpu_budget_s is not None:
        problems.append("cpu_budget_s")
    if cfg.algo == "dqn":
        if cfg.dqn.double:
            problems.append("dqn.double (SB3's DQN is not Double DQN: set dqn.double=false)")
        if cfg.dqn.exploration != "epsilon":
            problems.append(f"dqn.exploration {cfg.dqn.exploration}")
    if cfg.algo == "sac":
        if tuple(cfg.sac.log_std_bounds) != SB3_LOG_STD_BOUNDS:
            problems.append(f"sac.log_std_bounds {cfg.sac.log_std_bounds} (SB3: {SB3_LOG_STD_BOUNDS})")
        if pol.activation != "relu":
            problems.append(f"policy.activation {pol.activation} (frugalrl's SAC networks are ReLU)")
    if problems:
        raise ValueError(f"{cfg.name}: no SB3 counterpart for {'; '.join(problems)}")

    hp = cfg.algo_config
    kwargs: dict[str, Any] = dict(
        learning_rate=hp.learning_rate,
        buffer_size=replay.capacity,
        learning_starts=hp.learning_starts,
        batch_size=hp.batch_size,
        tau=hp.tau,
        gamma=hp.gamma,
        train_freq=hp.train_freq,
        gradient_steps=hp.gradient_steps,
    )
    if cfg.algo == "sac":
        kwargs.update(ent_coef=hp.ent_coef, target_entropy=hp.target_entropy)
    else:
        kwargs.update(
            target_update_interval=hp.target_update_interval,
            exploration_fraction=hp.exploration_fraction,
            exploration_initial_eps=hp.exploration_initial_eps,
            exploration_final_eps=hp.exploration_final_eps,
            max_grad_norm=hp.max_grad_norm,
        )
    activation = {"tanh": nn.Tanh, "relu": nn.ReLU}[pol.activation]
    kwargs["policy_kwargs"] = dict(net_arch=list(pol.hidden), activation_fn=activation)
    described = {
        "n_envs": env.num_envs,
        **{k: v for k, v in kwargs.items() if k != "policy_kwargs"},
        "policy_kwargs": {"net_arch": list(pol.hidden), "activation_fn": f"nn.{activation.__name__}"},
    }
    return cfg.algo.upper(), kwargs, described
