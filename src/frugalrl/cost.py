"""The cost meter: what a run spent, in counts first and seconds second.

Every technique in frugalrl claims a saving; the saving is a ratio of two ``CostMeter``
readings. Counts (env steps, samples, FLOPs) are exact and noise-free; times and memory
are reported beside them.

FLOPs are measured, not estimated: the first time a phase (acting, a training forward, a
training backward) runs, ``measure_flops`` runs it under ``torch.utils.flop_counter`` and
records FLOPs per sample; afterwards the meter multiplies by the sample counts.
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
    # Samples of auxiliary training work (e.g. an importance evaluator), by phase; their FLOPs
    # count into train_flops, since a technique's overhead is part of what it costs.
    aux_samples: dict[str, int] = field(default_factory=dict)
    flops_per_sample: dict[str, float] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=lambda: {"env": 0.0, "act": 0.0, "learn": 0.0})
    started: float = field(default_factory=time.perf_counter)
    wall_offset: float = 0.0  # seconds spent before a resume

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

    def count(self, phase: str, samples: int) -> None:
        """Add ``samples`` of auxiliary training work done in ``phase``."""
        self.aux_samples[phase] = self.aux_samples.get(phase, 0) + samples

    def absorb(self, other: CostMeter, prefix: str) -> None:
        """Add the work another learner metered on its own (its own per-sample FLOPs).

        Its env steps and seconds add up; its forward and backward passes count as auxiliary
        training work under ``<prefix>_forward`` / ``<prefix>_backward``, since they cost
        something else per sample than this meter's learner.
        """
        self.real_env_steps += other.real_env_steps
        self.virtual_env_steps += other.virtual_env_steps
        self.inference_samples += other.inference_samples
        self.optimizer_steps += other.optimizer_steps
        for phase, samples in (("forward", other.forward_samples), ("backward", other.backward_samples)):
            self.flops_per_sample[f"{prefix}_{phase}"] = other.flops_per_sample.get(phase, 0.0)
            self.count(f"{prefix}_{phase}", samples)
        for phase, samples in other.aux_samples.items():
            self.flops_per_sample[f"{prefix}_{phase}"] = other.flops_per_sample.get(phase, 0.0)
            self.count(f"{prefix}_{phase}", samples)
        for phase, seconds in other.seconds.items():
            self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds

    @property
    def aux_flops(self) -> float:
        return sum(self.flops_per_sample.get(phase, 0.0) * n for phase, n in self.aux_samples.items())

    @property
    def train_flops(self) -> float:
        """Training FLOPs: the learner's forward and backward passes, plus auxiliary training work."""
        return (
            self.flops_per_sample.get("forward", 0.0) * self.forward_samples
            + self.flops_per_sample.get("backward", 0.0) * self.backward_samples
            + self.aux_flops
        )

    @property
    def inference_flops(self) -> float:
        """FLOPs spent choosing actions during rollouts."""
        return self.flops_per_sample.get("act", 0.0) * self.inference_samples

    @property
    def wall_s(self) -> float:
        return self.wall_offset + time.perf_counter() - self.started

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
