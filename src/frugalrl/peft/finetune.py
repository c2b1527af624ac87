"""One fine-tuning run: the source SAC learner, adapted by one method, trained on one target task.

The SAC networks are built for the target env, loaded with the source's actor, critics and
temperature, then ``adapt`` freezes all but the method's parameters (in the actor, and in the
critics unless ``adapt_critic`` is off); the learner (``FinetuneSAC``) builds its optimizers over
what still trains, at ``peft.learning_rate``. The source policy first collects ``warmup_steps``
(no random-action phase: the point is to start from what it knows); then SAC updates run, through
the run loop, for the rest of the ``steps`` budget. FLOPs are metered with the adapted networks, so a
method that skips weight gradients shows it.

Two references run beside the methods (``peft.references``): ``none``, the source policy evaluated as it
is (the drop fine-tuning has to recover), and ``scratch``, SAC from fresh networks on the target with the
same env-step budget (what the transfer has to beat). Every training run keeps its learning curve: the
return of each training episode with the env step it ended at.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from frugalrl.algos.sac import SAC, SACNetworks
from frugalrl.config import EnvConfig, ExperimentConfig, PeftConfig, PeftTarget
from frugalrl.cost import CostMeter
from frugalrl.envs.factory import make_vec_env
from frugalrl.evaluation import evaluate_policy
from frugalrl.nets.policy import ExportedPolicy
from frugalrl.peft.methods import Adaptation, adapt, trainable_state
from frugalrl.peft.source import SourceRun
from frugalrl.run_setup import RunSetup

REFERENCES = ("none", "scratch")  # contenders that are not adaptation methods
ACTOR_HEADS = ["mean", "log_std"]
CRITIC_HEADS = ["q1.1", "q2.1"]


def target_env(source: ExperimentConfig, target: PeftTarget | None) -> EnvConfig:
    """The env config of a target task (``None``: the source task itself)."""
    if target is None:
        return source.env
    update: dict[str, Any] = {"dynamics": target.dynamics}
    if target.env_id:
        update["id"] = target.env_id
    return source.env.model_copy(update=update)


@dataclass
class FinetuneResult:
    method: str
    target: str
    seed: int
    adaptation: Adaptation
    critic_trainable: int
    eval_mean: float
    source_eval_mean: float  # on the source task after fine-tuning (forgetting)
    train_flops: float
    train_s: float
    env_steps: int
    actor: torch.nn.Module  # the adapted actor (adapters not merged)
    adapter_state: dict[str, torch.Tensor]
    curve: list[tuple[int, float]]  # (env step at its end, return) of every training episode

    def row(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "target": self.target,
            "seed": self.seed,
            "eval_mean": self.eval_mean,
            "source_eval_mean": self.source_eval_mean,
            "trainable": self.adaptation.trainable,
            "trainable_share": self.adaptation.trainable_share,
            "critic_trainable": self.critic_trainable,
            "train_flops": self.train_flops,
            "train_s": self.train_s,
            "env_steps": self.env_steps,
            "curve": json.dumps([[step, round(ret, 3)] for step, ret in self.curve]),
        }


def exported(actor: torch.nn.Module, config: ExperimentConfig, env: EnvConfig) -> ExportedPolicy:
    spec = {"env": env.model_dump(mode="json"), "policy": config.policy.model_dump(mode="json")}
    return ExportedPolicy(actor, spec=spec).eval()


class FinetuneSAC(SAC):
    """SAC on the target task from adapted source networks: at the start the source policy acts for
    ``warmup_steps`` env steps (no random-action phase and no updates: the point is to start from
    what it knows); then SAC updates run until ``sac.total_timesteps`` env steps."""

    def __init__(
        self,
        config: ExperimentConfig,
        env: Any,
        meter: CostMeter,
        device: torch.device,
        networks: SACNetworks,
        warmup_steps: int,
    ):
        super().__init__(config, env, meter, device, networks=networks)
        self.warmup_steps = min(warmup_steps, self.hp.total_timesteps)
        self.curve: list[tuple[int, float]] = []

    def episodes_ended(self, returns: list[float]) -> None:
        self.curve.extend((self.global_step, float(r)) for r in returns)

    def start(self, seed: int) -> None:
        super().start(seed)
        while self.global_step < self.warmup_steps:
            self.collect()

    def finished(self) -> bool:
        return self.global_step >= self.hp.total_timesteps


def adapted_networks(
    source: SourceRun, config: ExperimentConfig, env: Any, peft: PeftConfig, method: str, options: dict[str, Any]
) -> tuple[SACNetworks, Adaptation, Adaptation]:
    """The source's actor, critics and temperature, adapted by ``method`` (the critics too unless
    ``adapt_critic`` is off): only the method's parameters still require gradients."""
    networks = SACNetworks.build(env.single_observation_space, env.single_action_space, config)
    state = source.agent_state
    networks.actor.load_state_dict(state["policy"])
    networks.critic.load_state_dict(state["critic"])
    networks.log_alpha = state["log_alpha"]
    adaptation = adapt(networks.actor, method, options, ACTOR_HEADS)
    critic_options = options if peft.adapt_critic else None
    critic = adapt(networks.critic, method if peft.adapt_critic else "full", critic_options, CRITIC_HEADS)
    return networks, adaptation, critic


def finetune(
    source: SourceRun,
    peft: PeftConfig,
    method: str,
    options: dict[str, Any],
    target: PeftTarget,
    seed: int,
    out: Path | None = None,
) -> FinetuneResult:
    """Fine-tune the source on ``target`` with ``method``; evaluate on the target and the source task.

    The SAC updates go through the run loop; with ``out`` their metrics.jsonl (one row per update) is kept there.
    """

    def networks(config: ExperimentConfig, env: Any) -> tuple[SACNetworks, Adaptation, int]:
        built, adaptation, critic = adapted_networks(source, config, env, peft, method, options)
        return built, adaptation, critic.trainable

    sac = {"total_timesteps": peft.steps, "learning_starts": 0, "learning_rate": peft.learning_rate}
    return _train_on_target(source, peft, method, target, seed, out, sac, networks, peft.warmup_steps)


def from_scratch(source: SourceRun, peft: PeftConfig, target: PeftTarget, seed: int, out: Path | None = None
                 ) -> FinetuneResult:  # fmt: skip
    """The ``scratch`` reference: SAC from fresh networks on ``target`` for the same ``steps``, the first
    ``warmup_steps`` of them uniform random actions (SAC's ``learning_starts``), at the source's own
    learning rate: the run a transfer has to beat."""

    def networks(config: ExperimentConfig, env: Any) -> tuple[SACNetworks, Adaptation, int]:
        built = SACNetworks.build(env.single_observation_space, env.single_action_space, config)
        actor = sum(p.numel() for p in built.actor.parameters())
        return built, Adaptation("scratch", {}, actor, actor), sum(p.numel() for p in built.critic.parameters())

    sac = {"total_timesteps": peft.steps, "learning_starts": min(peft.warmup_steps, peft.steps)}
    return _train_on_target(source, peft, "scratch", target, seed, out, sac, networks, 0)


def untrained(source: SourceRun, peft: PeftConfig, target: PeftTarget, seed: int) -> FinetuneResult:
    """The ``none`` reference: the source policy on ``target`` and on the source task, with no training
    (the evaluation episodes are the methods' own, so its seeds repeat one figure)."""
    env_config = target_env(source.config, target)
    env = make_vec_env(env_config.model_copy(update={"num_envs": 1}), training=False)
    networks = SACNetworks.build(env.single_observation_space, env.single_action_space, source.config)
    env.close()
    networks.actor.load_state_dict(source.agent_state["policy"])
    actor = networks.actor.eval()
    count = sum(p.numel() for p in actor.parameters())
    on_target, on_source = _evaluate(actor, source.config, env_config, peft.eval_episodes)
    return FinetuneResult(
        method="none", target=target.name, seed=seed, adaptation=Adaptation("none", {}, 0, count),
        critic_trainable=0, eval_mean=on_target, source_eval_mean=on_source, train_flops=0.0, train_s=0.0,
        env_steps=0, actor=actor, adapter_state={}, curve=[],
    )  # fmt: skip


def _evaluate(actor: torch.nn.Module, config: ExperimentConfig, env_config: EnvConfig, episodes: int
              ) -> tuple[float, float]:  # fmt: skip
    """Mean return on the target task, then on the source task (forgetting); the same episodes for every run."""
    on_target = evaluate_policy(exported(actor, config, env_config), env_config, episodes, seed=10_000)
    source_env = target_env(config, None)
    on_source = evaluate_policy(exported(actor, config, source_env), source_env, episodes, seed=10_000)
    return on_target.mean, on_source.mean


def _train_on_target(
    source: SourceRun,
    peft: PeftConfig,
    method: str,
    target: PeftTarget,
    seed: int,
    out: Path | None,
    sac_update: dict[str, Any],
    networks_for: Any,
    warmup_steps: int,
) -> FinetuneResult:
    """SAC on ``target`` from the networks ``networks_for(config, env)`` builds, through the run loop."""
    torch.manual_seed(seed)
    base = source.config
    sac = base.sac.model_copy(update=sac_update)
    config = base.model_copy(update={"seed": seed, "sac": sac, "meta": base.meta.model_copy(update={"enabled": False})})
    env_config = target_env(base, target)
    env = make_vec_env(env_config.model_copy(update={"num_envs": 1}), gamma=sac.gamma)
    meter = CostMeter()
    device = torch.device("cpu")
    try:
        networks, adaptation, critic_trainable = networks_for(config, env)
        learner = FinetuneSAC(config, env, meter, device, networks, warmup_steps)
    except BaseException:
        env.close()
        raise
    setup = RunSetup.around(config, learner, meter, device, out)
    started = time.perf_counter()
    with setup.tracked():
        learner.start(seed)
        setup.run()
    train_s = time.perf_counter() - started
    actor = learner.policy.eval()
    on_target, on_source = _evaluate(actor, config, env_config, peft.eval_episodes)
    return FinetuneResult(
        method=method,
        target=target.name,
        seed=seed,
        adaptation=adaptation,
        critic_trainable=critic_trainable,
        eval_mean=on_target,
        source_eval_mean=on_source,
        train_flops=meter.train_flops,
        train_s=train_s,
        env_steps=learner.global_step,
        actor=actor,
        adapter_state=trainable_state(actor),
        curve=learner.curve,
    )
