"""One fine-tuning run: the source SAC learner, adapted by one method, trained on one target task.

The SAC networks are built for the target env, loaded with the source's actor, critics and
temperature, then ``adapt`` freezes all but the method's parameters (in the actor, and in the
critics unless ``adapt_critic`` is off); the learner (``FinetuneSAC``) builds its optimizers over
what still trains, at ``peft.learning_rate``. The source policy first collects ``warmup_steps``
(no random-action phase: the point is to start from what it knows); then SAC updates run, through
the run loop, for the rest of the ``steps`` budget. FLOPs are metered with the adapted networks, so a
method that skips weight gradients shows it.
"""

from __future__ import annotations

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
    torch.manual_seed(seed)
    base = source.config
    sac = base.sac.model_copy(
        update={"total_timesteps": peft.steps, "learning_starts": 0, "learning_rate": peft.learning_rate}
    )
    config = base.model_copy(update={"seed": seed, "sac": sac, "meta": base.meta.model_copy(update={"enabled": False})})
    env_config = target_env(base, target)
    env = make_vec_env(env_config.model_copy(update={"num_envs": 1}), gamma=sac.gamma)
    meter = CostMeter()
    device = torch.device("cpu")
    try:
        networks, adaptation, critic = adapted_networks(source, config, env, peft, method, options)
        learner = FinetuneSAC(config, env, meter, device, networks, peft.warmup_steps)
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
    on_target = evaluate_policy(exported(actor, config, env_config), env_config, peft.eval_episodes, seed=10_000)
    source_env = target_env(base, None)
    on_source = evaluate_policy(exported(actor, config, source_env), source_env, peft.eval_episodes, seed=10_000)
    return FinetuneResult(
        method=method,
        target=target.name,
        seed=seed,
        adaptation=adaptation,
        critic_trainable=critic.trainable,
        eval_mean=on_target.mean,
        source_eval_mean=on_source.mean,
        train_flops=meter.train_flops,
        train_s=train_s,
        env_steps=learner.global_step,
        actor=actor,
        adapter_state=trainable_state(actor),
    )
