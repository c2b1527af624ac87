"""What a local pipeline run shows: a line per stage as it starts and ends, with its figures.

kfp.local prints every task's full executor input and output (hundreds of lines of JSON per
stage) to stdout. ``StageConsole`` takes stdout's place while the pipeline runs: everything
goes to a log file, and the console gets one line when a stage starts, one when it ends (time,
stages done out of the total, the stage's metrics), the steps' own progress lines, and on a
failure the last lines the failing step printed.
"""

from __future__ import annotations

import ast
import re
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any, TextIO

ANSI = re.compile(r"\x1b\[[0-9;]*m")
STARTED = re.compile(r"Executing task '([^']+)'")
ENDED = re.compile(r"Task '([^']+)' finished with status (\w+)")
ARTIFACT = re.compile(r"^\w+: (\w+)\( name=")
# Lines the steps themselves print: training progress, pretraining notes, PEFT table rows.
PROGRESS = re.compile(r"^(step \d+/\d+ |pivot: |latent: |note: |\S+\s+\S+\s+seed \d+\s+return )")
# kfp.local's own chatter and executor JSON, kept out of the failure excerpt.
NOISE = re.compile(
    r"^(\[KFP Executor|[{}\[\]\"]|\],?$|},?$|Downloading artifacts|\d{4}/\d\d/\d\d .* INFO |uri=|metadata=|-+$"
    r"|\d\d:\d\d:\d\d\.\d+ - )"
)


def stage_names(pipeline: Any) -> tuple[dict[str, str], int]:
    """Task name -> display name for every task of a compiled pipeline, and how many stages will be
    reported done (a ``ParallelFor`` body counts once, however many of its iterations kfp.local reports)."""
    spec = pipeline.pipeline_spec
    names: dict[str, str] = {}

    def walk(dag: Any, nested: bool = False) -> None:
        for task_name, task in dag.tasks.items():
            component = spec.components[task.component_ref.name]
            if component.WhichOneof("implementation") == "dag":  # a loop, condition or sub-pipeline: its tasks run
                walk(component.dag, nested=True)
            else:
                # a sub-pipeline used twice holds the same task names; kfp.local runs each under its
                # component's unique name (evaluate, evaluate-2, ...), so that is the name it is shown by
                key = task.component_ref.name.removeprefix("comp-") if nested else task_name
                names[key] = task.task_info.name or task_name

    walk(spec.root.dag)
    return names, len(names)


class StageConsole:
    """``with StageConsole(log_path, names, total):`` around a kfp.local pipeline call."""

    def __init__(self, log_path: Path, names: dict[str, str], total: int, console: TextIO | None = None):
        self.log_path = log_path
        self.names, self.total = names, total
        self.console = console or sys.stdout
        self._finished: set[str] = set()  # stages done, by task name
        self._pending = ""
        self._started: dict[str, list[float]] = {}
        self._recent: deque[str] = deque(maxlen=15)
        self._artifact_kind = ""
        self._t0 = time.perf_counter()
        self._log: TextIO | None = None
        self._saved: TextIO | None = None

    def __enter__(self) -> StageConsole:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("a")
        self._saved, sys.stdout = sys.stdout, self  # kfp.local's logger and prints both look up sys.stdout
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._pending:
            self._line(self._pending)
            self._pending = ""
        sys.stdout = self._saved
        if self._log is not None:
            self._log.close()

    # the file protocol print() and logging.StreamHandler need
    def write(self, text: str) -> int:
        self._pending += text
        *lines, self._pending = self._pending.split("\n")
        for line in lines:
            self._line(line)
        return len(text)

    def flush(self) -> None:
        if self._log is not None:
            self._log.flush()

    def isatty(self) -> bool:
        return False

    def _say(self, text: str) -> None:
        minutes, seconds = divmod(int(time.perf_counter() - self._t0), 60)
        self.console.write(f"[{minutes:02d}:{seconds:02d}] {text}\n")
        self.console.flush()

    def _line(self, raw: str) -> None:
        line = ANSI.sub("", raw)
        self._log.write(line + "\n")
        text = line.strip()
        started, ended = STARTED.search(text), ENDED.search(text)
        if started:
            name = started.group(1)
            if not any(self._started.values()):  # nothing else running: older lines belong to finished stages
                self._recent.clear()
            self._started.setdefault(name, []).append(time.perf_counter())
            self._say(f"start  {self.names.get(name, name)}")
        elif ended:
            name, status = ended.groups()
            since = self._started.get(name, [time.perf_counter()]).pop(0)
            took = time.perf_counter() - since
            if status == "SUCCESS":
                # a ParallelFor body (the Optuna workers) ends once per iteration in some kfp.local runs and
                # once for all of them in others; the total counts it once, so a stage counts when first done
                self._finished.add(name)
                done = len(self._finished)
                self._say(f"done   {self.names.get(name, name)} ({took:.0f} s; {done} of {self.total} stages)")
            else:
                self._say(f"FAILED {self.names.get(name, name)} after {took:.0f} s; its last lines:")
                for recent in self._recent:
                    self.console.write(f"         | {recent}\n")
                self.console.write(f"         full log: {self.log_path}\n")
        elif ARTIFACT.match(text):
            self._artifact_kind = ARTIFACT.match(text).group(1)
        elif text.startswith("metadata={") and self._artifact_kind == "Metrics":
            self._metrics(text[len("metadata=") :].rstrip(" )"))
        elif PROGRESS.match(text):
            self.console.write(f"         {text}\n")
        elif text and not NOISE.match(text):
            self._recent.append(text if text.startswith("error: ") else text[:200])  # a step's refusal: whole

    def _metrics(self, text: str) -> None:
        try:
            metrics = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return
        shown = [f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in list(metrics.items())[:6]]
        if shown:
            self.console.write(f"         {', '.join(shown)}\n")
