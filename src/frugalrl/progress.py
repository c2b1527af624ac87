"""Training progress: a rich progress bar on a terminal, plain log lines otherwise."""

from __future__ import annotations

import sys
import time
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn


class TrainingProgress:
    """``with TrainingProgress(total) as bar: bar.update(step, metrics)``."""

    def __init__(self, total_steps: int, start_step: int = 0, log_every: int = 10, interactive: bool | None = None):
        self.total = total_steps
        self.log_every = log_every
        self.interactive = sys.stdout.isatty() if interactive is None else interactive
        self._start_step = start_step
        self._start_time = time.perf_counter()
        self._calls = 0
        self._progress: Progress | None = None
        self._task: Any = None

    def __enter__(self) -> TrainingProgress:
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
        sps = int((step - self._start_step) / elapsed)
        ret = metrics.get("episode_return")
        ret_text = f"{ret:.1f}" if ret is not None else "-"
        if self._progress is not None:
            self._progress.update(self._task, completed=min(step, self.total), sps=sps, ret=ret_text)
        elif self._calls % self.log_every == 0 or step >= self.total:
            print(f"step {step}/{self.total}  sps {sps}  return {ret_text}", flush=True)
