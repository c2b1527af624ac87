"""Evaluation during training: every ``eval.every_steps`` env steps, the best policy kept (``best_policy.pt``).

Stable-Baselines3's ``EvalCallback`` with ``best_model_save_path``, as a run-loop callback. Every
``eval.every_steps`` env steps (and after the last update) the current policy, exported as the
run's ``policy.pt`` is, plays ``eval.during_episodes`` episodes on envs of its own (episode i from
seed ``eval.seed + i``, as ``eval.deterministic`` says): the training env, the learner and the global
torch, NumPy and ``random`` generators are as they were afterwards, so a run learns the same with it on
or off. The row of that update gets ``eval/mean_return`` and ``eval/iqm`` (metrics.jsonl and MLflow);
a mean above every earlier one writes ``best_policy.pt``. Its seconds are ``seconds["eval"]`` of the
cost meter and its CPU-seconds are left out of the rows' ``cpu_s`` (and so of ``cpu_budget_s``): the
same as the final evaluation, it is no work of the run's learning.
"""

from __future__ import annotations

import contextlib
import json
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from frugalrl.algos.base import Learner
from frugalrl.config import ExperimentConfig
from frugalrl.cost import CostMeter
from frugalrl.evaluation import evaluate_policy
from frugalrl.loop import Callback
from frugalrl.policy_store import BEST_POLICY_FILE, save_policy
from frugalrl.rundir import export_policy, metrics_log_lines

MEAN_KEY, IQM_KEY = "eval/mean_return", "eval/iqm"


@contextlib.contextmanager
def generators_kept() -> Iterator[None]:
    """The global torch (CPU and every initialised CUDA device), NumPy and ``random`` states as they were before."""
    numpy_state, python_state = np.random.get_state(), random.getstate()
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    with torch.random.fork_rng(devices=devices):
        try:
            yield
        finally:
            np.random.set_state(numpy_state)
            random.setstate(python_state)


def best_logged(out: Path) -> dict[str, Any] | None:
    """The best ``eval/mean_return`` of the run's metrics.jsonl (a resume continues from its kept rows)."""
    best = None
    for line in metrics_log_lines(out):
        with contextlib.suppress(ValueError):
            row = json.loads(line)
            if isinstance(row, dict) and MEAN_KEY in row and (best is None or row[MEAN_KEY] > best["mean_return"]):
                best = {"step": row.get("step"), "mean_return": row[MEAN_KEY]}
    return best


class EvalDuringTraining(Callback):
    """Evaluates every ``config.eval.every_steps`` env steps and after the last update; keeps the best policy.

    Put it before ``MetricsLog`` and ``Tracking``: they write the row it adds ``eval/*`` to."""

    def __init__(self, config: ExperimentConfig, out: Path, meter: CostMeter):
        self.config, self.out, self.meter = config, Path(out), meter
        self.every = config.eval.every_steps
        self.next_at = self.every
        self.evaluated_at: int | None = None
        self.best: dict[str, Any] | None = None  # {"step", "mean_return"}: summary.json's best_eval

    def on_start(self, learner: Learner) -> None:
        self.next_at = (learner.global_step // self.every + 1) * self.every
        self.best = best_logged(self.out)

    def on_update(self, learner: Learner, metrics: dict[str, Any]) -> None:
        if learner.global_step >= self.next_at or learner.finished():
            metrics.update(self.evaluate(learner))
            self.next_at = (learner.global_step // self.every + 1) * self.every

    def on_end(self, learner: Learner) -> None:
        if self.evaluated_at != learner.global_step:  # stopped early (the CPU budget): its last policy is a candidate
            self.evaluate(learner)

    def evaluate(self, learner: Learner) -> dict[str, float]:
        """Play the current policy's episodes; save it when it beats the best so far; the row's ``eval/*`` keys."""
        cpu, wall = time.process_time(), time.perf_counter()
        config, step = self.config, learner.global_step
        with generators_kept():
            policy = learner.exported_policy() or export_policy(learner, config)
            ev = config.eval
            result = evaluate_policy(policy, config.env, ev.during_episodes, ev.seed, ev.deterministic)
            if self.best is None or result.mean > self.best["mean_return"]:
                save_policy(self.out / BEST_POLICY_FILE, policy, config)
                self.best = {"step": step, "mean_return": result.mean}
        self.evaluated_at = step
        self.meter.eval_cpu_s += time.process_time() - cpu
        self.meter.seconds["eval"] = self.meter.seconds.get("eval", 0.0) + time.perf_counter() - wall
        return {MEAN_KEY: result.mean, IQM_KEY: result.iqm}

    def below_best(self, final_mean: float) -> str | None:
        """One line when the final evaluation is below the best during training; None otherwise."""
        best = self.best
        if best is None or final_mean >= best["mean_return"]:
            return None
        registers = (
            "it is the one registered" if self.config.eval.policy == "best" else "eval.policy: best registers that one"
        )
        return (
            f"ended below its best: final eval mean {final_mean:.2f}, best during training {best['mean_return']:.2f} "
            f"at step {best['step']:,} ({BEST_POLICY_FILE}); {registers}"
        )
