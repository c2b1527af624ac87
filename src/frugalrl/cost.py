"""The cost meter: what a run spent, in counts first and seconds second.

Every technique in frugalrl claims a saving; the saving is a ratio of two ``CostMeter``
readings. Counts (env steps, samples, FLOPs) are exact and noise-free; times and memory
are reported beside them.

Every metered phase is one of three kinds, the same for every learner and technique, so two
runs are compared on the same items:

- ``train``: learning. The learner's forward and backward passes and a technique's own learning
  (target networks, the actor of SAC, a world-model refit, an importance evaluator's fit and labels).
- ``inference``: acting and seeing. The policy's action forward, encoding real frames into
  latents, stepping a world model, scoring states with an importance evaluator.
- ``pretrain``: making an artifact a run starts from (an encoder, a world model, an evaluator, a
  source policy). Done inside the run, it is metered like the rest; loaded from elsewhere, its
  cost comes with the artifact (``add_pretrained``) and is listed by name, so a table over many
  runs can list one shared artifact once, with the number of runs that used it.

``total_flops`` is the sum of the three. ``per_run_flops`` leaves out artifacts marked shared
(made once for many runs, such as a registered multi-game encoder); ``shared_pretrain_flops`` is
their cost.

How FLOPs are counted (the one place this is said): the first time a phase runs,
``run_counted`` runs it under ``torch.utils.flop_counter.FlopCounterMode`` and records FLOPs per
sample; afterwards the meter multiplies by the sample counts (a phase's cost is linear in its
samples). ``FlopCounterMode`` counts matrix multiplications and convolutions (2 FLOPs per
multiply-add); elementwise operations (activations, losses, optimizer updates, normalisation) are
excluded for every contender alike. Work with no matmul at all (gradient fusion's top-k encode and
decode) is counted by its own formula where it happens, and says so. A phase counted with samples
but no measured FLOPs is an error in the meter, not a free phase: ``unmeasured_phases`` names them,
and the tests require it empty.
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TypeVar

import torch
from torch.utils.flop_counter import FlopCounterMode

T = TypeVar("T")

TRAIN, INFERENCE, PRETRAIN = "train", "inference", "pretrain"
KINDS = (TRAIN, INFERENCE, PRETRAIN)

# The kind of a phase counted without naming one (every other phase is ``train``).
PHASE_KINDS = {
    "act": INFERENCE,
    "encode": INFERENCE,
    "encode_start": INFERENCE,
    "world_model_step": INFERENCE,
    "evaluator_score": INFERENCE,
    "encoder_train": PRETRAIN,
    "encoder_infer": PRETRAIN,
    "world_model_pretrain": PRETRAIN,
}


def count_flops(fn: Callable[[], T]) -> tuple[int, T]:
    """FLOPs of one call of ``fn`` (matmuls and convolutions, as torch counts them), and its result."""
    with FlopCounterMode(display=False) as counter:
        result = fn()
    return int(counter.get_total_flops()), result


def peak_rss_mb() -> float:
    """Peak resident memory of this process, in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


class _Timer:
    """A context manager as a plain class: rollout loops enter one per step, and a generator-based
    ``contextmanager`` costs several times more per use."""

    __slots__ = ("seconds", "phase", "start")

    def __init__(self, seconds: dict[str, float], phase: str):
        self.seconds = seconds
        self.phase = phase

    def __enter__(self) -> None:
        self.start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.seconds[self.phase] = self.seconds.get(self.phase, 0.0) + time.perf_counter() - self.start


@dataclass
class CostMeter:
    """Counters for one run. ``phase`` timers accumulate seconds by name."""

    real_env_steps: int = 0
    virtual_env_steps: int = 0
    inference_samples: int = 0
    forward_samples: int = 0
    backward_samples: int = 0
    # Optimizer steps of the learner: at small network sizes each costs a near-fixed time
    # (per-operation overhead), so this, not the sample count, predicts the learner's seconds.
    optimizer_steps: int = 0
    # Samples of every other phase (a technique's own work), by phase, and each phase's kind when
    # the caller named one (else ``PHASE_KINDS``): a technique's overhead is part of what it costs.
    aux_samples: dict[str, int] = field(default_factory=dict)
    phase_kinds: dict[str, str] = field(default_factory=dict)
    flops_per_sample: dict[str, float] = field(default_factory=dict)
    # Artifacts made elsewhere that this run starts from: name -> their total FLOPs (None: unknown).
    pretrained: dict[str, float | None] = field(default_factory=dict)
    shared: set[str] = field(default_factory=set)  # names in ``pretrained`` made once for many runs
    seconds: dict[str, float] = field(default_factory=lambda: {"env": 0.0, "act": 0.0, "learn": 0.0})
    started: float = field(default_factory=time.perf_counter)
    wall_offset: float = 0.0  # seconds spent before a resume
    # Evaluations during training (``eval.every_steps``): their wall seconds are ``seconds["eval"]``; their
    # CPU-seconds in this process are left out of the rows' ``cpu_s``, and so of ``cpu_budget_s`` (not in checkpoints:
    # a resumed process counts its CPU afresh). Neither is a phase: evaluation is no work of the run's learning.
    eval_cpu_s: float = 0.0

    def timed(self, phase: str) -> _Timer:
        """``with meter.timed("env"): ...`` adds the block's seconds to ``seconds[phase]``."""
        return _Timer(self.seconds, phase)

    def run_counted(self, phase: str, fn: Callable[[], T], samples: int) -> T:
        """Run ``fn`` (a step of ``phase`` over ``samples`` samples); the first time, count its FLOPs.

        Counting does not change the computation, so a run that measures and a resumed run
        that already knows the figure compute the same numbers.
        """
        if phase in self.flops_per_sample:
            return fn()
        flops, result = count_flops(fn)
        self.flops_per_sample[phase] = flops / max(samples, 1)
        return result

    def count(self, phase: str, samples: int, kind: str | None = None) -> None:
        """Add ``samples`` of work done in ``phase`` (of ``kind``; default ``PHASE_KINDS`` or train)."""
        if kind is not None:
            if kind not in KINDS:
                raise ValueError(f"cost kind {kind!r}: use one of {', '.join(KINDS)}")
            self.phase_kinds[phase] = kind
        self.aux_samples[phase] = self.aux_samples.get(phase, 0) + samples

    def kind_of(self, phase: str) -> str:
        return self.phase_kinds.get(phase) or PHASE_KINDS.get(phase, TRAIN)

    def add_pretrained(self, name: str, flops: float | None, shared: bool = False) -> None:
        """An artifact this run starts from and what making it cost (``None``: not recorded with it).

        ``shared``: made once for many runs (a registered encoder); ``per_run_flops`` leaves it out
        so a table can list it once, beside the runs that used it.
        """
        self.pretrained[name] = None if flops is None else float(flops)
        if shared:
            self.shared.add(name)

    def absorb(self, other: CostMeter, prefix: str) -> None:
        """Add the work another learner metered on its own (its own per-sample FLOPs).

        Its env steps and seconds add up; its forward and backward passes count as auxiliary
        training work under ``<prefix>_forward`` / ``<prefix>_backward``, since they cost
        something else per sample than this meter's learner.
        """
        self.real_env_steps += other.real_env_steps
        self.virtual_env_steps += other.virtual_env_steps
        self.optimizer_steps += other.optimizer_steps
        for phase, (kind, samples, _) in other.by_phase().items():
            self.flops_per_sample[f"{prefix}_{phase}"] = other.flops_per_sample.get(phase, 0.0)
            self.count(f"{prefix}_{phase}", samples, kind)
        self.pretrained.update(other.pretrained)
        self.shared.update(other.shared)
        for phase, seconds in other.seconds.items():
            self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds

    def by_phase(self) -> dict[str, tuple[str, int, float]]:
        """Every phase with samples: ``phase -> (kind, samples, FLOPs)``."""
        counts = {"forward": self.forward_samples, "backward": self.backward_samples, "act": self.inference_samples}
        counts.update(self.aux_samples)
        return {
            phase: (self.kind_of(phase), n, self.flops_per_sample.get(phase, 0.0) * n)
            for phase, n in counts.items()
            if n
        }

    def flops_of(self, kind: str) -> float:
        return sum(flops for k, _, flops in self.by_phase().values() if k == kind)

    def unmeasured_phases(self) -> list[str]:
        """Phases with samples whose FLOPs were never measured, and loaded artifacts whose cost was not
        recorded with them (gaps in the meter, never zeros)."""
        gaps = [phase for phase, (_, n, flops) in self.by_phase().items() if n and flops <= 0]
        return gaps + [f"pretrained {name}" for name, flops in self.pretrained.items() if flops is None]

    @property
    def aux_flops(self) -> float:
        """A technique's own learning work: the ``train`` phases beyond the learner's forward and backward."""
        return sum(
            f for phase, (k, _, f) in self.by_phase().items() if k == TRAIN and phase not in ("forward", "backward")
        )

    @property
    def train_flops(self) -> float:
        """Learning: the learner's forward and backward passes, plus a technique's own learning work."""
        return self.flops_of(TRAIN)

    @property
    def inference_flops(self) -> float:
        """Acting and seeing: action forwards, frame encoding, world-model steps, state scoring."""
        return self.flops_of(INFERENCE)

    @property
    def pretrain_flops(self) -> float:
        """Artifacts this run starts from: made here, or made elsewhere (their recorded cost)."""
        return self.flops_of(PRETRAIN) + sum(f for f in self.pretrained.values() if f is not None)

    @property
    def total_flops(self) -> float:
        return self.train_flops + self.inference_flops + self.pretrain_flops

    @property
    def shared_pretrain_flops(self) -> float:
        """Artifacts made once for many runs (in ``pretrain_flops`` and ``total_flops`` too)."""
        return sum(f for name, f in self.pretrained.items() if name in self.shared and f is not None)

    @property
    def per_run_flops(self) -> float:
        """What this run alone cost: ``total_flops`` without the shared artifacts."""
        return self.total_flops - self.shared_pretrain_flops

    @property
    def wall_s(self) -> float:
        return self.wall_offset + time.perf_counter() - self.started

    @property
    def train_wall_s(self) -> float:
        """``wall_s`` without the evaluations during training (``seconds["eval"]``)."""
        return self.wall_s - self.seconds.get("eval", 0.0)

    def train_cpu_s(self) -> float:
        """CPU-seconds this process has used (every thread), without its evaluations during training."""
        return time.process_time() - self.eval_cpu_s

    def summary(self) -> dict[str, float | int]:
        """The cost keys of the run contract (``summary.json``)."""
        out: dict[str, float | int] = {
            "real_env_steps": self.real_env_steps,
            "virtual_env_steps": self.virtual_env_steps,
            "forward_samples": self.forward_samples,
            "backward_samples": self.backward_samples,
            "optimizer_steps": self.optimizer_steps,
            "inference_samples": self.inference_samples,
            "train_flops": float(self.train_flops),
            "inference_flops": float(self.inference_flops),
            "aux_flops": float(self.aux_flops),
            "pretrain_flops": float(self.pretrain_flops),
            "total_flops": float(self.total_flops),
            "flops_by_phase": {
                p: {"kind": k, "samples": n, "flops": float(f)} for p, (k, n, f) in self.by_phase().items()
            },
            "pretrained_flops": dict(self.pretrained),
            "shared_pretrain_flops": float(self.shared_pretrain_flops),
            "per_run_flops": float(self.per_run_flops),
            "wall_s": round(self.wall_s, 3),
            "env_s": round(self.seconds.get("env", 0.0), 3),
            "act_s": round(self.seconds.get("act", 0.0), 3),
            "learn_s": round(self.seconds.get("learn", 0.0), 3),
            "peak_rss_mb": round(peak_rss_mb(), 1),
        }
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            out["peak_gpu_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        return out

    def state_dict(self) -> dict:
        state = asdict(self)
        state.pop("started")
        state.pop("eval_cpu_s")
        state["wall_offset"] = self.wall_s
        return state

    def load_state_dict(self, state: dict) -> None:
        for key, value in state.items():
            setattr(self, key, value)
        self.started = time.perf_counter()


# Who books a learner's env steps: a learner is handed one and calls it after every env step.
StepCounter = Callable[[CostMeter, int], None]


def count_real_steps(meter: CostMeter, steps: int) -> None:
    meter.real_env_steps += steps


def count_virtual_steps(meter: CostMeter, steps: int) -> None:
    """Imagined steps (a world model's), which the real-step budget does not count."""
    meter.virtual_env_steps += steps
