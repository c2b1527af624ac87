"""Running a race: every contender on paired seeds to the same CPU budget, one process per run, a row kept
as each run ends, so a killed race resumes where it stopped.

The budget is CPU-seconds of the run's process (every thread; set-up included, the final evaluation
apart), the ``cpu_budget_s`` every training run already honours: what a user pays for, on the machine
the race ran on. The price is reproducibility: where a run stops depends on the machine and its load, so
the same race repeated gives close but not identical rows, and CPU-seconds compare only on one kind of
machine (``race.json`` names it). Every run trains with one torch thread and tracking off, in a fresh
process, so runs in parallel (``parallel``) do not share threads and each one's CPU is its own. The
seeds are paired: seed k of every contender starts from the same seed, and the runs go seed by seed,
contenders alternating, so a drift of the machine hits every contender alike.

A pretraining stage a contender's config needs (PivotRL's evaluator, the latent encoder) is built once,
before the runs, and every contender that needs it loads it; its CPU is kept once in ``race.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frugalrl import pretraining
from frugalrl.config import ExperimentConfig, load_config
from frugalrl.errors import FrugalError
from frugalrl.race.contenders import Contender
from frugalrl.rundir import check_new_run_dir
from frugalrl.runlock import RunLock

RACE_FILE = "race.json"
ROWS_FILE = "rows.jsonl"
RUN_SETS = ("tracking.enabled=false", "threads=1")  # every run: no MLflow run, one torch thread
CURVE_POINTS = 200  # a run's (CPU-s, training return) curve, thinned to at most this many points


@dataclass(frozen=True)
class RaceSpec:
    """What a race compares: the config, the contenders (the control first), the seeds and the budget."""

    config: Path
    contenders: tuple[Contender, ...]
    seeds: tuple[int, ...]
    cpu_budget_s: float
    sets: tuple[str, ...] = ()  # the user's --set, on every contender after its own overrides

    @property
    def control(self) -> Contender:
        return self.contenders[0]

    def record(self) -> dict[str, Any]:
        """What ``race.json`` keeps of the spec (the seeds apart)."""
        if not self.config.is_file():
            raise FrugalError(f"the race's config {self.config} is not found from {Path.cwd()}; a race names its "
                              "config as it was given: resume it from the directory it started in")  # fmt: skip
        return {
            "config": str(self.config),
            "config_sha256": hashlib.sha256(self.config.read_bytes()).hexdigest(),
            "contenders": [c.as_dict() for c in self.contenders],
            "cpu_budget_s": self.cpu_budget_s,
            "sets": list(self.sets),
        }


def identity(record: dict[str, Any]) -> dict[str, Any]:
    """What a resumed race must share with the one it continues: config (and its file's content), contenders
    (name, config, overrides), budget and --set. The seeds may grow; a contender's description is words."""
    keep = ("config", "config_sha256", "cpu_budget_s", "sets")
    contenders = [{k: c[k] for k in ("name", "config", "overrides")} for c in record["contenders"]]
    return {**{k: record[k] for k in keep}, "contenders": contenders}


def machine() -> dict[str, Any]:
    """The machine a race ran on: its CPU-seconds compare only with another race's on the same kind."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": model, "cpus": os.cpu_count(), "python": platform.python_version()}


def load_spec(out: Path) -> tuple[RaceSpec, dict[str, Any]]:
    """The spec of the race in ``out`` (its ``race.json``) and the file's whole content."""
    path = Path(out) / RACE_FILE
    if not path.is_file():
        raise FrugalError(f"{out} holds no race ({RACE_FILE} missing); start one with frugalrl race --out {out}")
    data = json.loads(path.read_text())
    contenders = tuple(Contender(c["name"], Path(c["config"]), tuple(c["overrides"]), c["description"])
                       for c in data["contenders"])  # fmt: skip
    spec = RaceSpec(Path(data["config"]), contenders, tuple(data["seeds"]), data["cpu_budget_s"], tuple(data["sets"]))
    return spec, data


def read_rows(out: Path) -> list[dict[str, Any]]:
    path = Path(out) / ROWS_FILE
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_race(
    spec: RaceSpec, out: Path, *, resume: bool = False, parallel: int = 1, echo: Callable[[str], None] = print
) -> list[dict[str, Any]]:
    """Train every (seed, contender) of ``spec`` that has no row in ``out`` yet; returns every row.

    A new race needs a new or empty ``out``; ``resume`` continues the race there (same config, contenders,
    budget and --set; more seeds allowed). Runs ``parallel`` processes at a time."""
    out = Path(out)
    if resume:
        _, data = load_spec(out)
        ran_on, here = data.get("machine", {}), machine()
        if (ran_on.get("cpu"), ran_on.get("cpus")) != (here["cpu"], here["cpus"]):
            raise FrugalError(f"{out} is a race run on {ran_on.get('cpu')} ({ran_on.get('cpus')} CPUs), this "
                              f"machine is {here['cpu']} ({here['cpus']} CPUs): CPU-seconds compare only on one kind "
                              "of machine; resume it there or start a new race with another --out")  # fmt: skip
        if identity(data) != identity(spec.record()):
            raise FrugalError(f"{out} holds a race of other contenders, budget, --set or config "
                              "(or its config file changed); a resumed race keeps them: start a new race with "
                              "another --out")  # fmt: skip
    else:
        if (out / RACE_FILE).is_file():
            raise FrugalError(f"--out {out} holds a race; continue it with frugalrl race --resume {out}, or pick a "
                              "new --out")  # fmt: skip
        check_new_run_dir(out, option="--out", resumable=False)
        data = {}
    with RunLock.take(out):
        data = {**data, **spec.record(), "seeds": list(spec.seeds), "machine": machine(),
                "pretrained": data.get("pretrained", {})}  # fmt: skip
        _write_json(out / RACE_FILE, data)
        pointers = _pretrain_once(spec, out, data, echo)
        done = {(r["contender"], r["seed"]) for r in read_rows(out)}
        jobs = [(seed, c) for seed in spec.seeds for c in spec.contenders if (c.name, seed) not in done]
        if done:
            echo(f"{len(done)} runs kept from before; {len(jobs)} to go")
        lock = threading.Lock()

        def one(job: tuple[int, Contender]) -> None:
            seed, contender = job
            row = _run(spec, contender, seed, out, pointers.get(contender.name, []))
            with lock:
                with (out / ROWS_FILE).open("a") as rows:
                    rows.write(json.dumps(row) + "\n")
                echo(_line(row))

        _each(one, jobs, parallel)
    return read_rows(out)


def _each(work: Callable[[Any], None], jobs: Sequence[Any], parallel: int) -> None:
    """``work`` on every job, ``parallel`` at a time; the first failure is raised once the others end."""
    if parallel <= 1:
        for job in jobs:
            work(job)
        return
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        futures = [pool.submit(work, job) for job in jobs]
        errors = [f.exception() for f in futures]
    first = next((e for e in errors if e is not None), None)
    if first is not None:
        raise first


def run_sets(contender: Contender, sets: Sequence[str]) -> list[str]:
    """A contender's overrides on its config: the race's --set, then the contender's own changes (which were
    worked out on the config with those --set: ``contenders``), then what every run gets."""
    return [*sets, *contender.overrides, *RUN_SETS]


def _config(contender: Contender, spec: RaceSpec, extra: Sequence[str] = ()) -> ExperimentConfig:
    return load_config(contender.config, [*run_sets(contender, spec.sets), *extra])


def _pretrain_once(
    spec: RaceSpec, out: Path, data: dict[str, Any], echo: Callable[[str], None]
) -> dict[str, list[str]]:
    """Build what each contender's config needs pretrained, once per distinct config (at the first seed):
    contenders of one config share it, a contender whose config differs (another latent size, say) gets its
    own. Returns each such contender's override pointing at it; ``data['pretrained']`` keeps what was built,
    for whom and its CPU-seconds."""
    pointers: dict[str, list[str]] = {}
    for contender in spec.contenders:
        config = _config(contender, spec, [f"seed={spec.seeds[0]}"])
        stage = pretraining.needed_by(config)
        if stage is None or _given(config, stage.override):
            continue
        key = f"{stage.name}-{config.hash()[:8]}"
        built = data["pretrained"].get(key)
        where = out / "pretrain" / key
        if built is None or not (where / "done.json").is_file():
            shutil.rmtree(where, ignore_errors=True)  # what a killed build left
            where.mkdir(parents=True)
            echo(f"pretraining {stage.produces} once ({stage.name}, for {contender.name}'s config)")
            cpu0, wall0 = time.process_time(), time.perf_counter()
            pretraining.collect(stage, config, where / "dataset.npz")
            pretraining.pretrain(stage, config, where, where / "dataset.npz")
            built = {"dir": f"pretrain/{key}", "stage": stage.name, "produces": stage.produces,
                     "built_from": contender.name, "cpu_s": round(time.process_time() - cpu0, 3),
                     "wall_s": round(time.perf_counter() - wall0, 3), "used_by": []}  # fmt: skip
            (where / "dataset.npz").unlink(missing_ok=True)
            _write_json(where / "done.json", built)
        built["used_by"] = sorted({*built["used_by"], contender.name})
        data["pretrained"][key] = built
        _write_json(out / RACE_FILE, data)
        pointers[contender.name] = [stage.point_at(str((out / built["dir"]).resolve()))]
    return pointers


def _given(config: ExperimentConfig, dotted: str) -> bool:
    """Whether the config already names the stage's artifact (then the contender uses that one)."""
    value: Any = config.to_dict()
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return bool(value)


def _run(spec: RaceSpec, contender: Contender, seed: int, out: Path, pointers: Sequence[str]) -> dict[str, Any]:
    """One ``frugalrl train`` of ``contender`` on ``seed`` to the budget, in its own process; its row."""
    name = f"{contender.name}-seed{seed}"
    run_dir, log = out / "runs" / name, out / "runs" / f"{name}.log"
    shutil.rmtree(run_dir, ignore_errors=True)  # a run a kill interrupted has no row: it runs again from the start
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    sets = [*run_sets(contender, spec.sets), *pointers, f"seed={seed}", f"cpu_budget_s={spec.cpu_budget_s}"]
    command = [sys.executable, "-m", "frugalrl", "train", str(contender.config), "--out", str(run_dir)]
    for item in sets:
        command += ["--set", item]
    start = time.perf_counter()
    with log.open("w") as log_file:
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        _pid, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    wall_s = time.perf_counter() - start
    if process.returncode != 0:
        tail = (log.read_text().strip().splitlines() or ["(no output)"])[-1]
        raise FrugalError(f"contender {contender.name}, seed {seed}: training failed (exit {process.returncode}): "
                          f"{tail} (log: {log})")  # fmt: skip
    cpu_s = usage.ru_utime + usage.ru_stime
    return run_row(contender.name, seed, run_dir, cpu_s, wall_s, bool(pointers), f"runs/{name}")


def run_row(
    contender: str, seed: int, run_dir: Path, process_cpu_s: float, wall_s: float, pretrained: bool, where: str
) -> dict[str, Any]:
    """The row of one finished run (``run_dir``'s summary and curve), as ``rows.jsonl`` keeps it; a figure the
    summary lacks is left out, not null (a KFP step's output holds no null)."""
    summary = json.loads((Path(run_dir) / "summary.json").read_text())
    row = {
        "contender": contender,
        "seed": seed,
        "score": summary["eval_mean"],
        "eval_returns": summary.get("eval_returns"),
        "eval_protocol": summary.get("eval_protocol"),
        "train_cpu_s": summary["cpu_s"],
        "process_cpu_s": round(process_cpu_s, 3),
        "wall_s": round(wall_s, 3),
        "env_steps": summary.get("real_env_steps"),
        "stopped_by_cpu_budget": bool(summary.get("stopped_by_cpu_budget")),
        "pretrained": pretrained,
        "machine": machine(),
        "curve": curve(run_dir),
        "run": where,
    }
    return {key: value for key, value in row.items() if value is not None}


def curve(run_dir: Path) -> list[list[float]]:
    """[CPU-s of the process, training return] after each update that reported real episodes (the learner's
    running mean of recent episodes; imagined rollouts left out), thinned to ``CURVE_POINTS``."""
    points = []
    path = Path(run_dir) / "metrics.jsonl"
    for line in path.read_text().splitlines() if path.is_file() else []:
        row = json.loads(line)
        if row.get("source") == "virtual" or row.get("episode_return") is None or row.get("cpu_s") is None:
            continue
        points.append([round(float(row["cpu_s"]), 3), round(float(row["episode_return"]), 4)])
    stride = max(1, -(-len(points) // CURVE_POINTS))
    thinned = points[::stride]
    return thinned + ([points[-1]] if points and thinned[-1] != points[-1] else [])


def _line(row: dict[str, Any]) -> str:
    ended = "the CPU budget" if row["stopped_by_cpu_budget"] else "its step budget"
    steps = f"{row['env_steps']:,}" if row.get("env_steps") is not None else "?"
    return (f"{row['contender']} seed {row['seed']}: score {row['score']:.2f}, {steps} env steps in "
            f"{row['train_cpu_s']:.1f} training CPU-s ({ended} ended it)")  # fmt: skip


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)
