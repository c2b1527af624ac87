"""Latent-curriculum training: PPO on encoder latents, fed by real and virtual rollouts.

    encoder (frozen) ----> real frames become latents ----------> real PPO source --\\
    world model --------> imagined latents from real starts ----> virtual PPO source -+-> one policy
    curriculum scheduler: which source the next rollout comes from (stages or adaptive)

``LatentCurriculum`` is one learner for the run loop (``frugalrl.loop``); ``train`` drives it like
any other (``frugalrl.run_setup`` makes the run directory, then ``latent_learner`` the learner).
Both sources are plain ``PPO`` learners sharing one policy and one optimizer, so an update is the
same clipped-surrogate step whichever env produced the rollout; only the step counter differs (real
vs virtual). The budget is in real env steps (``ppo.total_timesteps``, or ``total_real_steps``).
Every ``world_model.refresh_every_updates`` real updates the world model is refitted on the latest
real transitions and virtual episodes start from fresh real latents (Dyna: ``frugalrl.latent.dyna``).
The encoder and world model come from ``frugalrl.latent.prepare``; their pretraining inside the run
counts into ``pretrain_flops`` (a loaded encoder's recorded cost too); encoding real frames and
stepping the world model are ``inference``; the policy's and the world-model refit's learning are
``train`` (``frugalrl.cost``).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import torch

from frugalrl.algos.base import LearnerBase
from frugalrl.algos.ppo import PPO
from frugalrl.config import ExperimentConfig, validate_config
from frugalrl.cost import CostMeter, count_virtual_steps
from frugalrl.envs.factory import make_vec_env
from frugalrl.errors import ConfigError, FrugalError
from frugalrl.latent.adapter import EncodedActorCritic, lora_encoder, merged_encoder, trainable_parameters
from frugalrl.latent.curriculum import CurriculumScheduler
from frugalrl.latent.dyna import WorldModelRefresher
from frugalrl.latent.envs import EncodedVectorEnv, VirtualVectorEnv
from frugalrl.latent.prepare import prepare_models
from frugalrl.latent.quality import diagnostic_gate, world_model_quality
from frugalrl.nets.policy import ActorCritic, ExportedPolicy, InputStandardiser, build_actor_critic


def warn_batch_ratio(config: ExperimentConfig) -> str | None:
    """The seed keeps virtual:real minibatch sizes between 4:1 and 8:1; say so once when outside."""
    latent = config.latent
    ratio = latent.virtual_batch_size / latent.real_batch_size
    if 4.0 <= ratio <= 8.0:
        return None
    return (
        f"warning: latent.virtual_batch_size / real_batch_size = {ratio:.2f}, outside the seed's 4:1-8:1 range; "
        "the run goes on"
    )


def _source_configs(config: ExperimentConfig) -> tuple[ExperimentConfig, ExperimentConfig]:
    """The real learner's config and the virtual one's (more envs, its own minibatch size)."""
    latent = config.latent
    base = config.to_dict()
    real = {**base, "ppo": {**base["ppo"], "batch_size": latent.real_batch_size}}
    virtual = {
        **base,
        "env": {**base["env"], "num_envs": latent.virtual_num_envs},
        "ppo": {**base["ppo"], "batch_size": latent.virtual_batch_size},
    }
    return validate_config(real, "latent.real_batch_size"), validate_config(virtual, "latent.virtual_batch_size")


def latent_learner(config: ExperimentConfig, out: Path, meter: CostMeter, device: torch.device) -> LatentCurriculum:
    """The curriculum learner of a new run in ``out`` (created by ``frugalrl.run_setup``, which starts it: the
    ``latent`` rollout source, ``frugalrl.rollouts``); the encoder and world model are prepared here (loaded,
    transferred or pretrained)."""
    if (out / "summary.json").exists() or (out / "metrics.jsonl").exists():
        raise FrugalError(f"{out} already holds a run; pick a new --out (latent runs cannot be resumed yet)")
    if device.type != "cpu":
        raise ConfigError("latent curriculum runs on device: cpu for now (its world model steps on CPU)")
    warning = warn_batch_ratio(config)
    if warning:
        print(warning)
    return LatentCurriculum(config, out, meter, device)


class LatentCurriculum(LearnerBase):
    """The latent curriculum as one learner: each ``run_update()`` is one PPO update on the source
    the curriculum picks (virtual, real, or real through the LoRA-adapted encoder).

    ``global_step`` counts real env steps (the budget); virtual steps are in the meter.
    """

    techniques = ("latent_curriculum",)
    resumable = False  # no checkpoints yet: two envs, a world model and a replay of latents to save

    def __init__(self, config: ExperimentConfig, out: Path, meter: CostMeter, device: torch.device):
        self.config = config
        self.meter = meter
        self.device = device
        self.models, bank, self.note = prepare_models(config, meter, out)
        print(f"latent: {self.note}; {len(bank)} start latents")
        real_config, virtual_config = _source_configs(config)
        self.env = EncodedVectorEnv(make_vec_env(config.env, gamma=config.ppo.gamma), self.models.encoder, meter)
        wm_cfg = config.latent.world_model
        self.virtual_env = VirtualVectorEnv(
            self.models.world_model, bank, config.latent.virtual_num_envs, wm_cfg.horizon, wm_cfg.virtual_noise,
            seed=config.seed, meter=meter,
        )  # fmt: skip
        self.real = PPO(real_config, self.env, meter, device, policy=_latent_policy(config, self.env, bank, device))
        # Virtual updates follow the real learner's lr / clip schedule without advancing it.
        self.virtual = PPO(
            virtual_config, self.virtual_env, meter, device,
            policy=self.real.policy, optimizer=self.real.optimizer, count_steps=count_virtual_steps, schedule=self.real,
        )  # fmt: skip
        self.policy = self.real.policy
        self.scheduler = CurriculumScheduler(config.latent.curriculum, config.ppo.total_timesteps)
        self.refresher = WorldModelRefresher(self.models, config, meter)
        self.total = config.ppo.total_timesteps
        self.lora: LoraLearner | None = None
        self.real_updates = 0
        self._head: dict[str, Any] = {}  # the last update's source, stage and step counts
        self._finalized = False

    # ------------------------------------------------------------------ the loop's view
    def start(self, seed: int) -> None:
        self.real.start(seed)
        self.virtual.start(seed)

    @property
    def global_step(self) -> int:
        """Real env steps so far (the LoRA stage's included)."""
        return self.real.global_step + (self.lora.agent.global_step if self.lora else 0)

    @property
    def update(self) -> int:
        """The real learner's updates (summary.json's ``updates``)."""
        return self.real.update

    @property
    def next_obs(self) -> torch.Tensor | None:
        return self.real.next_obs

    @property
    def total_steps(self) -> int:
        return self.total

    def finished(self) -> bool:
        return self.global_step >= self.total

    def run_update(self) -> dict[str, float]:
        """One PPO update on the source the curriculum picks; Dyna refits after real updates."""
        scheduler, wm_cfg = self.scheduler, self.config.latent.world_model
        before = self.global_step
        source = scheduler.next_source(before)
        if source == "real" and in_lora_stage(self.config, scheduler, before):
            self.lora = self.lora or LoraLearner(self.real, self.models.encoder, self.config, self.device)
            metrics = self.lora.agent.run_update()
            steps = self.lora.agent.rollout_size
            source = "real_lora"
        elif source == "virtual":
            metrics = self.virtual.run_update()
            steps = self.virtual.rollout_size
        else:
            metrics = self.real.run_update()
            steps = self.real.rollout_size
            self.real_updates += 1
            self.refresher.add(self.real)
            if wm_cfg.refresh_every_updates and self.real_updates % wm_cfg.refresh_every_updates == 0:
                metrics["world_model_loss"] = self.refresher.refit()
                self.virtual_env.set_start_latents(self.refresher.start_latents())
            if "episode_return" in metrics:
                scheduler.observe_score(metrics["episode_return"])
        scheduler.record("virtual" if source == "virtual" else "real", steps, before)
        self._head = {
            "source": source,
            "stage": scheduler.stage(before) + 1,
            "real_step": self.global_step,
            "virtual_step": self.meter.virtual_env_steps,
        }
        return metrics

    def log_record(self, metrics: dict[str, Any]) -> dict[str, Any]:
        return {**self._head, **metrics}

    def tracking_metrics(self, metrics: dict[str, Any]) -> tuple[dict[str, Any], int]:
        source = self._head["source"]
        numeric = {f"{source}/{k}": v for k, v in metrics.items() if isinstance(v, int | float)}
        return numeric, self.global_step + self.meter.virtual_env_steps

    # ------------------------------------------------------------------ the end of the run
    def finalize(self) -> None:
        """The LoRA learner metered on its own: its work joins the run's meter once."""
        if self.lora and not self._finalized:
            self.meter.absorb(self.lora.meter, "lora")
        self._finalized = True

    def summary_extra(self) -> dict[str, Any]:
        extra = {
            **self.real.summary_extra(),
            **self.scheduler.summary(),
            "real_updates": self.real_updates,
            "encoder_note": self.note,
        }
        if self.lora:
            extra.update(lora_updates=self.lora.agent.update, lora_trainable_parameters=self.lora.trainable)
        if self.real.update > 0:  # the world model against the last real latent rollout (frugalrl.latent.quality)
            real, wm_cfg = self.real, self.config.latent.world_model
            extra.update(world_model_quality(
                self.models.world_model, real.policy, real.obs, real.actions, real.rewards, real.dones,
                wm_cfg.horizon, seed=self.config.seed,
            ))  # fmt: skip
            status, reason = diagnostic_gate(extra, wm_cfg.gate_min_auc, wm_cfg.gate_events_tolerance)
            extra.update(wm_gate=status, wm_gate_reason=reason)
            if status == "failed" and self.meter.virtual_env_steps > 0:
                print(f"warning: the world model failed its diagnostic gate ({reason}): the virtual steps of this "
                      "run imagined another game than the real one")  # fmt: skip
        return extra

    def exported_policy(self) -> ExportedPolicy:
        """The MLP policy behind the encoder (LoRA adapters merged in), taking frames."""
        encoder = merged_encoder(self.lora.encoder) if self.lora else self.models.encoder
        return ExportedPolicy(
            _frozen_copy(self.real.policy),
            spec={"env": self.config.env.model_dump(mode="json"), "policy": self.config.policy.model_dump(mode="json")},
            encoder=_frozen_copy(encoder),
        )

    def model_example(self) -> np.ndarray:
        """A frame stack (the exported policy's input), not a latent."""
        return np.asarray(self.env.env.reset(seed=self.config.seed)[0][:1])

    def state_dict(self) -> dict[str, Any]:
        raise FrugalError("latent-curriculum runs cannot be checkpointed yet")

    def load_state_dict(self, state: dict[str, Any]) -> None:
        raise FrugalError("latent-curriculum runs cannot be resumed yet; start a new run with --out")


def _latent_policy(
    config: ExperimentConfig, env: EncodedVectorEnv, bank: torch.Tensor, device: torch.device
) -> ActorCritic | None:
    """The actor-critic on latents: with ``latent.policy_input: standardised``, its input is standardised by
    the real start latents' statistics (PPO builds the plain one when this returns None)."""
    if config.latent.policy_input == "raw":
        return None
    norm = InputStandardiser.fit(bank)
    return build_actor_critic(env.single_observation_space, env.single_action_space, config.policy, norm).to(device)


def in_lora_stage(config: ExperimentConfig, scheduler: CurriculumScheduler, real_steps_done: int) -> bool:
    """True in the trailing all-real stages when ``encoder_adapter: lora`` (config validation ensures one)."""
    if config.latent.encoder_adapter != "lora":
        return False
    stages = config.latent.curriculum.stages
    first = len(stages)
    while first > 0 and stages[first - 1].virtual_fraction == 0.0:
        first -= 1
    return scheduler.stage(real_steps_done) >= first


class LoraLearner:
    """The real learner of the final stage: PPO on frames through a LoRA-adapted copy of the encoder.

    It shares the actor-critic and the optimizer (the adapters join as a parameter group) and
    steps the same real env, restarted: its episodes begin fresh when the stage begins. It
    meters on its own (an encoder pass costs more per sample than the latent MLP) and the run
    absorbs that meter at the end.
    """

    def __init__(self, real: PPO, encoder: torch.nn.Module, config: ExperimentConfig, device: torch.device):
        latent = config.latent
        self.encoder = lora_encoder(encoder, latent.lora_rank, latent.lora_alpha)
        adapters = [p for p in self.encoder.parameters() if p.requires_grad]
        self.trainable = trainable_parameters(self.encoder)
        real.optimizer.add_param_group({"params": adapters})
        self.meter = CostMeter()
        raw_env = real.env.env  # the frames under EncodedVectorEnv
        policy = EncodedActorCritic(self.encoder, real.policy)
        # Same config and env count as the real learner: the same num_updates, so the lr / clip
        # schedule continues from the real learner's count.
        self.agent = PPO(
            real.config, raw_env, self.meter, device, policy=policy, optimizer=real.optimizer, first_update=real.update
        )
        self.agent.start(config.seed + 7919)
        print(f"latent: real stage with LoRA on the encoder (rank {latent.lora_rank}, {self.trainable} parameters)")


def _frozen_copy(module: torch.nn.Module) -> torch.nn.Module:
    return copy.deepcopy(module).cpu().eval().requires_grad_(False)
