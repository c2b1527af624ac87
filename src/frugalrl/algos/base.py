"""What the run loop needs from a learner: the ``Learner`` protocol and ``LearnerBase`` defaults.

A learner owns its env, its networks and its counters; the loop (``frugalrl.loop``) only calls
the methods below, so PPO, DQN, SAC and the latent curriculum all train through it:

    learner.start(seed)                 first observations
    while not learner.finished():
        metrics = learner.run_update()  one unit of work: collect, then learn (PPO: one rollout)
        ... callbacks: metrics.jsonl, MLflow, progress, checkpoint, the tuner ...

Checkpoints hold ``state_dict()``; ``summary_extra()``, ``techniques``, ``exported_policy()`` and
``model_example()`` feed summary.json and the MLflow model. ``LearnerBase`` gives every optional
part a default, so a learner states only what differs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    import torch

    from frugalrl.config import ExperimentConfig
    from frugalrl.cost import CostMeter
    from frugalrl.nets.policy import ExportedPolicy


@runtime_checkable
class Learner(Protocol):
    """A learner the run loop can drive (see the module docstring)."""

    config: ExperimentConfig
    env: Any  # the training vector env (wrappers included)
    policy: torch.nn.Module
    meter: CostMeter
    update: int  # completed units of work
    global_step: int  # env steps taken so far (the progress and MLflow x-axis)
    next_obs: torch.Tensor | None
    gradient_sync: Callable[..., None] | None  # multi-worker runs: fuses gradients
    techniques: Sequence[str]  # summary.json's ``techniques``
    resumable: bool  # whether the run can write checkpoints and be resumed

    def start(self, seed: int) -> None:
        """Reset the envs: the first observations of training."""

    def run_update(self) -> dict[str, float]:
        """One unit of work (collect, then learn); the unit's metrics."""

    def finished(self) -> bool:
        """True once the budget is spent."""

    @property
    def total_steps(self) -> int:
        """The budget in ``global_step`` units (for the progress bar)."""

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly here (checkpoints)."""

    def load_state_dict(self, state: dict[str, Any]) -> None: ...

    def seed_sampling(self, seed: int) -> None:
        """Give this worker its own sampling stream (multi-worker runs)."""

    def log_record(self, metrics: dict[str, Any]) -> dict[str, Any]:
        """The metrics.jsonl row of the update that produced ``metrics``."""

    def tracking_metrics(self, metrics: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """What MLflow gets for this update, and at which step."""

    def summary_extra(self) -> dict[str, Any]:
        """Keys this learner adds to summary.json."""

    def exported_policy(self) -> ExportedPolicy | None:
        """The policy to save, or None for the standard export of ``policy`` (see ``rundir.export_policy``)."""

    def model_example(self) -> np.ndarray:
        """An input example for the MLflow model signature."""

    def finalize(self) -> None:
        """Called once after the last update, before the run is summarised."""


class LearnerBase:
    """Defaults for the optional parts of ``Learner``; subclasses set the counters and override as needed."""

    gradient_sync: Callable[..., None] | None = None
    techniques: Sequence[str] = ()
    resumable = True
    # Set by every subclass (declared here for type checkers).
    config: ExperimentConfig
    env: Any
    update: int
    num_updates: int
    rollout_size: int
    global_step: int
    next_obs: torch.Tensor | None

    def finished(self) -> bool:
        return self.update >= self.num_updates

    @property
    def total_steps(self) -> int:
        return self.num_updates * self.rollout_size

    def seed_sampling(self, seed: int) -> None:
        """No sampling stream of its own by default (PPO samples from torch's global RNG)."""

    def log_record(self, metrics: dict[str, Any]) -> dict[str, Any]:
        return {"update": self.update, "step": self.global_step, **metrics}

    def tracking_metrics(self, metrics: dict[str, Any]) -> tuple[dict[str, Any], int]:
        return metrics, self.global_step

    def summary_extra(self) -> dict[str, Any]:
        return {}

    def exported_policy(self) -> ExportedPolicy | None:
        return None

    def model_example(self) -> np.ndarray:
        assert self.next_obs is not None, "call start(seed) first"
        return self.next_obs[:1].cpu().numpy()

    def finalize(self) -> None:
        """Nothing to settle by default."""


@runtime_checkable
class Snapshottable(Protocol):
    """A base env whose physics state can be saved and restored (bit-identical resume)."""

    def snapshot(self) -> Any: ...

    def restore(self, snapshot: Any) -> None: ...
