"""How the benchmark scripts run their contenders: one way for all of them (issue 32).

- ``cli`` / ``train``: one ``frugalrl`` command (``python -m frugalrl.cli ...``, tracking off, one torch
  thread unless told otherwise) in a fresh process, its output kept in a log beside the run, its
  CPU-seconds taken from ``os.wait4`` (user + system of every thread: the figure that survives a shared
  machine), its ``summary.json`` read back (``Run``).
- ``worker`` / ``write_result``: a script's own ``--worker`` mode (a contender that is not a ``frugalrl``
  command, or one timed from inside) in a fresh ``python -m benchmarks.x`` process, its result handed back
  as JSON in a file.
- ``interleave``: the order of runs: seed by seed, every contender once per seed (A B A B ...), so a drift
  of the machine hits every contender alike and a stopped comparison leaves whole pairs.
- ``measure`` / ``record``: one row per finished run, appended to the results file before the next run
  starts, optionally ``workers`` runs at a time.

The statistics of the rows (the paired statistic, medians, IQM, bootstrap) are in ``_report``.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from . import _report

S = TypeVar("S")
C = TypeVar("C")
J = TypeVar("J")
T = TypeVar("T")

# Every run of a benchmark writes no MLflow run; ``threads=1`` keeps contenders off each other's cores.
TRACKING_OFF = "tracking.enabled=false"
_lock = threading.Lock()


# --------------------------------------------------------------------------- the order of runs
def interleave(seeds: Iterable[S], contenders: Sequence[C], mirror: bool = False) -> list[tuple[S, C]]:
    """(seed, contender) in the order the runs go: seed by seed, every contender once per seed, always in the
    same order (A B A B ...). ``mirror``: every other seed in reverse (A B B A ...), where the position
    within a seed matters too (a store measured right after another one's allocations)."""
    order = []
    for i, seed in enumerate(seeds):
        order += [(seed, c) for c in (reversed(contenders) if mirror and i % 2 else contenders)]
    return order


# --------------------------------------------------------------------------- a frugalrl command in its own process
@dataclass(frozen=True)
class Run:
    """A finished ``frugalrl`` command."""

    out: Path  # what it wrote (its run directory)
    sets: list[str]  # the ``--set`` overrides it ran with, the harness's first
    cpu_s: float  # user + system CPU-seconds of the process, every thread (os.wait4)
    wall_s: float  # wall-clock from outside the process: start-up and imports included
    log: Path  # its stdout and stderr
    stopped: bool = False  # ended by ``cli``'s ``stop_after_s``, not finished

    @property
    def summary(self) -> dict:
        return json.loads((self.out / "summary.json").read_text())

    def metrics(self) -> Iterator[dict]:
        """The rows of its ``metrics.jsonl``, in order."""
        return metrics(self.out)


def metrics(run_dir: Path | str) -> Iterator[dict]:
    """The rows of a run directory's ``metrics.jsonl``, in order."""
    for line in Path(run_dir, "metrics.jsonl").read_text().splitlines():
        yield json.loads(line)


def first_reaching(run_dir: Path | str, threshold: float) -> dict | None:
    """The first ``metrics.jsonl`` row whose ``episode_return`` (the training mean of the last 100 episodes)
    reaches ``threshold``: its ``step`` is the env step the run got there; None if it never did."""
    return next((row for row in metrics(run_dir) if row.get("episode_return", float("-inf")) >= threshold), None)


def cli(
    command: Sequence[str],
    out: Path,
    sets: Sequence[str] = (),
    threads: int | None = 1,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    log: Path | None = None,
    poll: Callable[[], None] | None = None,
    stop_after_s: float | None = None,
) -> Run:
    """``python -m frugalrl.cli COMMAND --set tracking.enabled=false [--set threads=N] --set SETS...`` in a fresh
    process that writes ``out``; raises with the log's tail if it fails.

    ``threads``: None leaves the config's own (multi-process runs); ``env``: variables set for this process on
    top of this one's; ``cwd``: default ``out``'s parent, so a stray file lands beside the run, not in the
    checkout; ``log``: default ``<out>.log`` beside ``out``. ``poll`` is called every few seconds while the
    command runs and once after it ends (to keep what it has written so far); ``stop_after_s`` ends the
    command and its worker processes after that long (``Run.stopped``: not a failure).
    """
    # The command runs in ``cwd`` (default: beside the run), so a run directory named relative to the caller's
    # directory would land under that one instead (measured: runs/x/runs/x/...): pass the caller's meaning on.
    given, out = str(out), Path(out).absolute()
    command = [str(out) if str(part) == given else part for part in command]
    first = [TRACKING_OFF, *([f"threads={threads}"] if threads is not None else [])]
    sets = list(dict.fromkeys([*first, *sets]))  # a script's own tracking / threads setting is not passed twice
    log = Path(log) if log else out.parent / f"{out.name}.log"
    cwd = Path(cwd) if cwd else out.parent
    for path in (log.parent, cwd):
        path.mkdir(parents=True, exist_ok=True)
    args = [sys.executable, "-m", "frugalrl.cli", *map(str, command), *[a for s in sets for a in ("--set", s)]]
    started = time.perf_counter()
    stopped = False
    with log.open("w") as fh:
        proc = subprocess.Popen(args, stdout=fh, stderr=subprocess.STDOUT, cwd=cwd, env={**os.environ, **(env or {})},
                                start_new_session=stop_after_s is not None)  # fmt: skip  # its own group: workers too
        while True:
            pid, status, usage = os.wait4(proc.pid, 0 if poll is None and stop_after_s is None else os.WNOHANG)
            if pid:
                break
            if poll is not None:
                poll()
            if stop_after_s is not None and not stopped and time.perf_counter() - started > stop_after_s:
                os.killpg(proc.pid, signal.SIGTERM)
                stopped = True
            time.sleep(2.0)
    if poll is not None:
        poll()
    wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    if code != 0 and not stopped:
        raise RuntimeError(f"frugalrl {' '.join(map(str, command[:2]))} failed (exit {code}; {log}):\n{_tail(log)}")
    return Run(out, sets, usage.ru_utime + usage.ru_stime, wall, log, stopped)


def fresh_dir(base: Path) -> Path:
    """``base``, or where a run is done again (a script's ``--redo``) ``base-2``, ``base-3``...: ``frugalrl train``
    refuses a directory that holds a run, and the earlier run is kept."""
    candidates = (base if i == 1 else base.with_name(f"{base.name}-{i}") for i in itertools.count(1))
    return next(path for path in candidates if not path.exists())


def train(config: Path | str, out: Path, sets: Sequence[str] = (), **kwargs: Any) -> Run:
    """``frugalrl train CONFIG --out OUT`` (see ``cli`` for the rest)."""
    return cli(["train", str(config), "--out", str(out)], out, sets, **kwargs)


def _tail(log: Path, chars: int = 4000) -> str:
    return log.read_text(errors="replace")[-chars:]


# --------------------------------------------------------------------------- a script's --worker in its own process
def worker(module: str, args: Sequence[str], env: Mapping[str, str] | None = None, cwd: Path | None = None) -> dict:
    """``python -m MODULE ARGS --result FILE`` in a fresh process (so no threads, caches or RNG state leak from one
    contender to the next): the dict its worker wrote with ``write_result``. Raises with the worker's output
    if it fails. A script passes its own ``__spec__.name`` (``benchmarks.x``; its ``__name__`` is ``__main__``
    when run with ``-m``).

    The repository root is put on the worker's ``PYTHONPATH`` after any the caller names in ``env``: ``-m``
    finds ``benchmarks`` from any ``cwd``, and a caller's own folder first (another checkout's ``src``) wins."""
    with tempfile.TemporaryDirectory(prefix="bench-worker-") as tmp:
        result, log = Path(tmp) / "result.json", Path(tmp) / "worker.log"
        cmd = [sys.executable, "-m", module, *map(str, args), "--result", str(result)]
        child = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        child["PYTHONPATH"] = os.pathsep.join(p for p in (child.get("PYTHONPATH"), str(_report.REPO_ROOT)) if p)
        with log.open("w") as fh:
            proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=cwd or _report.REPO_ROOT, env=child)
            code = proc.wait()
        if code != 0 or not result.exists():
            raise RuntimeError(f"{module} {' '.join(map(str, args))} failed (exit {code}):\n{_tail(log)}")
        return json.loads(result.read_text())


def write_result(result: dict, path: str | None) -> None:
    """The worker's side of ``worker``: its result as JSON into ``path`` (printed where there is none)."""
    text = json.dumps(result)
    if path:
        Path(path).write_text(text)
    else:
        print(text)


# --------------------------------------------------------------------------- rows, as runs finish
def record(results: Path, row: dict, line: str | None = None) -> dict:
    """Append ``row`` (one finished run) to ``results`` and print ``line``: under one lock, so runs finishing on
    worker threads at once never interleave their rows."""
    with _lock:
        _report.append_row(results, row)
        if line:
            print(line, flush=True)
    return row


def measure(
    jobs: Iterable[J],
    one: Callable[[J], dict],
    results: Path,
    common: dict,
    line: Callable[[dict], str] | None = None,
    workers: int = 1,
) -> list[dict]:
    """Every job in order (``workers`` at a time, threads): ``one(job)`` returns a run's figures, which become
    its row (``_report.stamp``: the invocation's keys, the load average before and after, the time), kept as
    soon as the run ends. The rows, in the order of the jobs."""

    def run(job: J) -> dict:
        load_before = _report.load_average()
        row = _report.stamp(common, **one(job), load_before=load_before)
        return record(results, row, line(row) if line else None)

    return parallel(run, jobs, workers)


def parallel(fn: Callable[[J], T], jobs: Iterable[J], workers: int = 1) -> list[T]:
    """``fn(job)`` for every job, ``workers`` at a time (threads: each job waits on its own process), in order;
    the first failure is raised once the jobs before it are done."""
    if workers <= 1:
        return [fn(job) for job in jobs]
    with ThreadPoolExecutor(workers) as pool:
        return [future.result() for future in [pool.submit(fn, job) for job in jobs]]


# --------------------------------------------------------------------------- scoring a peer's policy
def episode_returns(env: Any, act: Callable[[Any], Any], episodes: int, seed: int) -> list[float]:
    """The return of each of ``episodes`` episodes of ``act(obs) -> action`` on the gymnasium ``env``, episode i
    reset with seed ``seed + i``: how a peer's policy is scored on frugalrl's evaluation seeds (frugalrl's own
    evaluator does the same)."""
    returns = []
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + i)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(act(obs))
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return returns
