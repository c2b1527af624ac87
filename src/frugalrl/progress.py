"""Training progress: a rich progress bar on a terminal, plain log lines otherwise.

Off a terminal, every ``log_every`` updates (and at the last) one line::

    step 2560/8192  sps 5630  return 26.1  policy_loss -0.0123  eta 1m05s

(the learner's main loss under its own name: PPO's ``policy_loss``, DQN's ``loss``, SAC's ``critic_loss``;
``eta``: the steps left at this rate). A ``header`` (the MLflow run and where to see it) is printed once
at the start, in both modes.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

# The loss a log line shows: the first of these the learner reports.
LOSS_KEYS = ("policy_loss", "loss", "critic_loss", "actor_loss", "world_model_loss")


def duration(seconds: float) -> str:
    """``1h02m``, ``3m05s``, ``12s`` or ``0.4s``."""
    if seconds < 10:
        return f"{seconds:.1f}s"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class TrainingProgress:
    """``with TrainingProgress(total) as bar: bar.update(step, metrics)``."""

    def __init__(
        self,
        total_steps: int,
        start_step: int = 0,
        log_every: int = 10,
        interactive: bool | None = None,
        header: str | None = None,
    ):
        self.total = total_steps
        self.log_every = log_every
        self.interactive = sys.stdout.isatty() if interactive is None else interactive
        self.header = header
        self._start_step = start_step
        self._start_time = time.perf_counter()
        self._calls = 0
        self._progress: Progress | None = None
        self._task: Any = None

    def __enter__(self) -> TrainingProgress:
        if self.header:
            print(self.header, flush=True)
        if self.interactive:
            self._progress = Progress(
                TextColumn("[bold]train"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[sps]:>7} sps  return {task.fields[ret]}"),
                TimeRemainingColumn(),
            )
            self._progress.__enter__()
            self._task = self._progress.add_task(
                "train", total=self.total, completed=self._start_step, sps="-", ret="-"
            )
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)

    def update(self, step: int, metrics: dict[str, float]) -> None:
        self._calls += 1
        elapsed = max(time.perf_counter() - self._start_time, 1e-9)
        rate = (step - self._start_step) / elapsed
        sps = int(rate)
        ret = metrics.get("episode_return")
        ret_text = f"{ret:.1f}" if ret is not None else "-"
        if self._progress is not None:
            self._progress.update(self._task, completed=min(step, self.total), sps=sps, ret=ret_text)
        elif self._calls % self.log_every == 0 or step >= self.total:
            line = f"step {step}/{self.total}  sps {sps}  return {ret_text}"
            loss = next((key for key in LOSS_KEYS if isinstance(metrics.get(key), int | float)), None)
            if loss is not None:
                line += f"  {loss} {metrics[loss]:.4g}"
            if rate > 0:
                line += f"  eta {duration(max(self.total - step, 0) / rate)}"
            print(line, flush=True)
