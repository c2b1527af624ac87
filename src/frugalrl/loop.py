"""The run loop: one loop drives every learner, and everything around it is a callback.

    run_loop(learner, [Throughput(meter), MetricsLog(file), Tracking(tracker), Progress(bar),
                       OnUpdate(tuner_report), Checkpointer(path, state_fn, every)])

After each ``learner.run_update()`` the callbacks see ``(learner, metrics)`` in list order (as
Stable-Baselines3 callbacks and DreamerV3's ``driver.on_step``): a callback may add to
``metrics`` for the ones after it (``Throughput`` adds ``sps``), raise to abort the run (the
tuner's ``TrialPruned``), or return ``False`` to end training early (the run is then summarised
as usual). Techniques that act between updates (the meta-controller, score stages) can hook in
the same way.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from frugalrl.algos.base import Learner
from frugalrl.checkpoint import save_checkpoint
from frugalrl.cost import CostMeter
from frugalrl.progress import TrainingProgress


class Callback:
    """A hook of the run loop; every method is optional."""

    def on_start(self, learner: Learner) -> None:
        """Before the first update of this loop (after ``start`` or a restore)."""

    def on_update(self, learner: Learner, metrics: dict[str, Any]) -> bool | None:
        """After every update; ``False`` ends training after this update."""
        return None

    def on_end(self, learner: Learner) -> None:
        """After the last update (not called when an update or a callback raised)."""


def run_loop(learner: Learner, callbacks: Sequence[Callback] = ()) -> int:
    """Drive ``learner`` until it is finished or a callback says stop; the number of updates run."""
    for callback in callbacks:
        callback.on_start(learner)
    updates = 0
    while not learner.finished():
        metrics = learner.run_update()
        updates += 1
        go_on = True
        for callback in callbacks:  # every callback sees the update, even after one said stop
            if callback.on_update(learner, metrics) is False:
                go_on = False
        if not go_on:
            break
    for callback in callbacks:
        callback.on_end(learner)
    return updates


class Throughput(Callback):
    """Adds ``sps`` (env steps per second of metered wall-clock) and ``cpu_s`` (CPU-seconds this process has
    used so far, every thread: the x-axis of a comparison at equal compute) to the metrics; evaluations
    during training (``EvalDuringTraining``) are left out of both."""

    def __init__(self, meter: CostMeter):
        self.meter = meter

    def on_update(self, learner: Learner, metrics: dict[str, Any]) -> None:
        meter = self.meter
        metrics.update(sps=learner.global_step / max(meter.train_wall_s, 1e-9), cpu_s=round(meter.train_cpu_s(), 3))


class CpuBudget(Callback):
    """Ends training after the update at which the process has used ``budget_s`` CPU-seconds (every thread:
    ale-py steps games in its own threads). ``stopped`` says whether it was the budget that ended the run."""

    def __init__(self, budget_s: float, clock: Callable[[], float] = time.process_time):
        self.budget_s = budget_s
        self.clock = clock
        self.stopped = False

    def on_update(self, learner: Learner, metrics: dict[str, Any]) -> bool | None:
        # the row's own figure where ``Throughput`` put one: the stop is decided on what metrics.jsonl shows
        # (a fresh clock here, read after the row was written, could stop a run whose last row is under budget)
        spent = metrics.get("cpu_s")
        if (self.clock() if spent is None else spent) >= self.budget_s:
            self.stopped = True
            return False
        return None


class MetricsLog(Callback):
    """One line of metrics.jsonl per update (the learner shapes the row), flushed at once."""

    def __init__(self, handle: IO[str]):
        self.handle = handle

    def on_update(self, learner: Learner, metrics: dict[str, Any]) -> None:
        self.handle.write(json.dumps(learner.log_record(metrics)) + "\n")
        self.handle.flush()


class Tracking(Callback):
    """The update's metrics to MLflow (``tracker``: a ``RunTracker``)."""

    def __init__(self, tracker: Any):
        self.tracker = tracker

    def on_update(self, learner: Learner, metrics: dict[str, Any]) -> None:
        tracked, step = learner.tracking_metrics(metrics)
        self.tracker.log_metrics(tracked, step=step)


class Progress(Callback):
    """The progress bar (or log lines off a terminal)."""

    def __init__(self, progress: TrainingProgress):
        self.progress = progress

    def on_update(self, learner: Learner, metrics: dict[str, Any]) -> None:
        self.progress.update(learner.global_step, metrics)


class OnUpdate(Callback):
    """A plain ``fn(learner, metrics)`` (``train``'s ``on_update``: the tuner reports and prunes there)."""

    def __init__(self, fn: Callable[[Any, dict[str, Any]], bool | None]):
        self.fn = fn

    def on_update(self, learner: Learner, metrics: dict[str, Any]) -> bool | None:
        return self.fn(learner, metrics)


class Checkpointer(Callback):
    """Writes ``state(learner)`` to ``path`` atomically every ``every`` updates and after the last
    (also when a callback ended training early)."""

    def __init__(self, path: Path, state: Callable[[Any], dict[str, Any]], every: int):
        self.path = path
        self.state = state
        self.every = every
        self.saved_at: int | None = None

    def on_update(self, learner: Learner, metrics: dict[str, Any]) -> None:
        if learner.update % self.every == 0 or learner.finished():
            self.save(learner)

    def on_end(self, learner: Learner) -> None:
        if self.saved_at != learner.update:
            self.save(learner)

    def save(self, learner: Learner) -> None:
        save_checkpoint(self.path, self.state(learner))
        self.saved_at = learner.update
