"""Shared helpers for the benchmark scripts: machine facts, statistics, and writing into docs/benchmarks.md.

Every table in ``docs/benchmarks.md`` lives between ``<!-- BEGIN name -->`` and ``<!-- END name -->``
markers; a script that is run with ``--write`` replaces only its own section and leaves the rest of the
file (other sections, the claims ledger) untouched.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DOC_PATH = REPO_ROOT / "docs" / "benchmarks.md"

PACKAGES = ("frugalrl", "torch", "numpy", "gymnasium", "ale-py", "mujoco", "stable-baselines3")

SECTIONS = {
    "env_throughput": "## Env throughput: the env factory against a plain gymnasium loop",
    "ppo_vs_sb3": "## PPO on CartPole-v1: frugalrl against Stable-Baselines3",
    "ppo_time_breakdown": "## Where PPO's time goes on CartPole-v1",
    "ppo_step_micro": "## The pieces of a CartPole PPO step, before and after",
    "ppo_vs_sb3_lunarlander": "## PPO on LunarLander-v3: frugalrl against Stable-Baselines3",
    "ppo_vs_sb3_halfcheetah": "## PPO on HalfCheetah-v5: frugalrl against Stable-Baselines3",
    "offpolicy_vs_sb3_pendulum": "## SAC on Pendulum-v1: frugalrl against Stable-Baselines3",
    "offpolicy_vs_sb3_halfcheetah": "## SAC on HalfCheetah-v5: frugalrl against Stable-Baselines3",
    "offpolicy_vs_sb3_cartpole": "## DQN on CartPole-v1: frugalrl against Stable-Baselines3",
    "offpolicy_vs_sb3_lunarlander": "## DQN on LunarLander-v3: frugalrl against Stable-Baselines3",
    "pivot_vs_ppo": "## PivotRL against PPO and equal-compute controls",
    "selection_signals": "## Which importance signal beats random skipping of the same size",
    "pivot_pretrained": "## PivotRL on CartPole with a pretrained evaluator",
    "pivot_pretrain_stability": "## Does a pretrained evaluator steady PivotRL's start?",
    "latent_encoders": "## Latent curriculum: encoder objectives, PSNR against what the latent knows",
    "latent_vs_pixel": "## Latent curriculum against pixel PPO on Atari",
    "replay_throughput": "## Replay throughput: frugalrl's stores against SB3's ReplayBuffer",
    "rmt_ablation": "## RMT parts as an ablation (DQN / SAC)",
    "tiered_replay_diagnosis": "## Why tiered replay lost: its sampling rule measured on a fixture",
    "peft_methods": "## PEFT methods: transferring a HalfCheetah policy to changed dynamics",
    "fusion": "## Top-k gradient fusion on 2 workers",
    "pivot_labels": "## PivotRL importance labels compared",
    "pivot_transfer": "## PivotRL evaluator transfer (CartPole -> Acrobot)",
    "probe_cache": "## The RAM probe's CNN ceiling, computed and cached",
    "random_atari": "## The random policy on full Atari games, against the published random scores",
    "world_model_quality": "## Does the virtual env imagine the real game? World-model diagnostics, replay ratio",
    "reward_predictability": "## Can the frozen latent tell when a reward comes? RAM, latent and world-model heads",
    "atari_throughput": "## What a million Atari agent steps cost: the latent policy, pixel PPO, Stable-Baselines3",
    "atari_equal_cpu": "## Pixel PPO against the latent policy at equal CPU-seconds, full games",
    "rliable_check": "## The equal-CPU intervals computed again by rliable",
    "rliable_improvement": "## The races' probability of improvement computed again by rliable",
    "demo_game_equal_cpu": "## The demo's game: the latent curriculum against pixel PPO at equal CPU-seconds",
}


def _ledger() -> str:
    body = "_Rendered by `benchmarks/ledger.py`._"
    return f"## Claims ledger\n\n<!-- BEGIN claims_ledger -->\n{body}\n<!-- END claims_ledger -->\n"


INTRO = """# Benchmarks

## How frugalrl measures

Every figure here follows one measurement method: the contenders
run side by side in one run of one script, alternating (A B A B ...), on the same seeds and budgets;
we quote medians with min and max; CPU threads are pinned; peers run as their users run them
(Stable-Baselines3 with RL Zoo hyperparameters, a plain gymnasium loop for env throughput); every
table states its command, date, machine, package versions and number of seeds; a missed target is
reported as "missed", not re-tuned.

The tables below are written by the scripts in `benchmarks/` (run them with `--write`); each script
only replaces the text between its own `BEGIN`/`END` markers.
"""


def _section_stub(name: str) -> str:
    return f"{SECTIONS[name]}\n\n<!-- BEGIN {name} -->\n_Not yet run._\n<!-- END {name} -->\n"


def _template() -> str:
    parts = [INTRO]
    parts.extend(_section_stub(name) for name in SECTIONS)
    parts.append(_ledger())
    return "\n".join(parts)


def cpu_model() -> str:
    """The CPU model as ``lscpu`` names it (falls back to /proc/cpuinfo, then platform)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True, timeout=10).stdout
        for line in out.splitlines():
            if line.strip().startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpus_text(affinity: object, total: object = None) -> str:
    """``2 CPUs`` or, for a run pinned with ``taskset``, ``2 CPUs, this run pinned to 1``."""
    if total is None or total == affinity:
        return f"{affinity} CPUs (`nproc`)"
    return f"{total} CPUs, this run pinned to {affinity} (`taskset`; `nproc` says {affinity})"


def nproc() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def gpu_name() -> str:
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except Exception:
        pass
    return "none"


def package_versions(names: Sequence[str] = PACKAGES) -> dict[str, str]:
    from frugalrl.tracking import package_versions as installed

    return {"python": platform.python_version(), **installed(names)}


def git_commit() -> str:
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "src"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        return sha + (" (src/ has uncommitted changes)" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def file_sha256(path: Path) -> str:
    """A file's fingerprint (an encoder made again from the same recipe is another file)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_average() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "unknown"
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"


def portable(text: str) -> str:
    """``text`` without this machine's paths: the checkout's become repo-relative, the temporary
    directory's ``$TMPDIR/``, so a kept row or a doc line names what any reader's checkout has."""
    text = text.replace(f"{REPO_ROOT}/", "").replace(str(REPO_ROOT), ".")
    return text.replace(f"{tempfile.gettempdir().rstrip('/')}/", "$TMPDIR/")


def command_line() -> str:
    """The command that is running, as a user would type it from the repository root: ``python -m benchmarks.x
    ...`` (under ``-m``, ``sys.argv[0]`` is the module's file)."""
    script = Path(sys.argv[0]).resolve()
    try:
        invoked = ["-m", ".".join(script.relative_to(REPO_ROOT).with_suffix("").parts)]
    except ValueError:
        invoked = [str(script)]
    return portable(shlex.join(["python", *invoked, *sys.argv[1:]]))


# A row kept before benchmarks/ became a package names the script's file: ``python benchmarks/x.py ...``.
_SCRIPT_FILE = re.compile(r"\bpython benchmarks/(\w+)\.py\b")


def as_run_today(command: str) -> str:
    """A kept row's command as it is typed today, ``python -m benchmarks.x ...``: the row keeps what was run,
    the doc shows how to run it again."""
    return _SCRIPT_FILE.sub(r"python -m benchmarks.\1", command)


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def machine_lines(command: str, load_start: str, load_end: str, extra: Sequence[str] = ()) -> list[str]:
    """The "every table says" block: command, date, machine, versions, load, plus ``extra`` lines."""
    versions = package_versions()
    version_text = ", ".join(f"{k} {v}" for k, v in versions.items())
    lines = [
        f"- command: `{command}`",
        f"- date: {now()}; frugalrl commit {git_commit()}",
        f"- machine: {cpus_text(nproc(), os.cpu_count())}, {cpu_model()} (`lscpu` model name), GPU: {gpu_name()}",
        f"- versions: {version_text}",
        f"- load average (1/5/15 min) at start: {load_start}; at end: {load_end}",
    ]
    lines.extend(f"- {line}" for line in extra)
    return lines


def summarize(values: Sequence[float]) -> tuple[float, float, float]:
    """(median, min, max)."""
    return statistics.median(values), min(values), max(values)


def fmt_mmm(values: Sequence[float], fmt: str = "{:,.0f}") -> str:
    """``median (min-max)``."""
    med, lo, hi = summarize(values)
    return f"{fmt.format(med)} ({fmt.format(lo)}-{fmt.format(hi)})"


def median_of(rows: Iterable[dict], key: str) -> float:
    """The median of one column of ``rows``."""
    return statistics.median(r[key] for r in rows)


def mmm(values: Sequence[float], fmt: str) -> str:
    """``median (min-max)``, or ``median (min to max)`` where a value is negative (returns); ``-`` for none."""
    if not values:
        return "-"
    med, lo, hi = summarize(values)
    return f"{fmt.format(med)} ({fmt.format(lo)}{'-' if lo >= 0 else ' to '}{fmt.format(hi)})"


def opt(value: object, fmt: str, missing: str = "-") -> str:
    """``value`` formatted, or ``missing`` where it is None (a figure a contender does not report)."""
    return missing if value is None else fmt.format(value)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    out.extend("| " + " | ".join(str(cell) for cell in row) + " |" for row in rows)
    return "\n".join(out)


def write_section(name: str, body: str, path: Path = DOC_PATH, after: Sequence[str] = ()) -> Path:
    """Replace the text between ``<!-- BEGIN name -->`` and ``<!-- END name -->`` in ``path``.

    Creates the file from the template if it does not exist. If the markers are missing, the section
    (heading from ``SECTIONS``) is added right after the first section named in ``after`` that the file
    has (after that section's hand-written notes too: before the next ``## `` heading), else before the
    claims ledger, else at the end.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    text = path.read_text() if path.exists() else _template()
    begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
    if begin not in text or end not in text:
        stub = _section_stub(name) if name in SECTIONS else f"## {name}\n\n{begin}\n{end}\n"
        anchor = next((f"<!-- END {a} -->" for a in after if f"<!-- END {a} -->" in text), None)
        marker = "## Claims ledger"
        if anchor is not None:
            start = text.index(anchor) + len(anchor)
            heading = re.search(r"^## ", text[start:], re.MULTILINE)
            if heading is None:
                text = text.rstrip("\n") + "\n\n" + stub
            else:
                at = start + heading.start()
                text = text[:at] + stub + "\n" + text[at:]
        elif marker in text:
            text = text.replace(marker, stub + "\n" + marker, 1)
        else:
            text = text + "\n" + stub
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    text = pattern.sub(lambda _: f"{begin}\n{body.strip()}\n{end}", text, count=1)
    path.write_text(text)
    return path


# --------------------------------------------------------------------------- per-run rows (benchmarks/results/*.jsonl)
RESULTS_DIR = Path(__file__).resolve().parent / "results"
RACES_DIR = RESULTS_DIR / "races"  # the worked races' kept files (race_examples), one folder per race


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_batch_id() -> str:
    """An id shared by the rows of one invocation: UTC start time and process id."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + f"-{os.getpid()}"


def machine_facts() -> dict[str, object]:
    return {"nproc": nproc(), "cpus_total": os.cpu_count(), "cpu": cpu_model(), "gpu": gpu_name()}


def batch_common(**extra: object) -> dict[str, object]:
    """The keys every row of one invocation shares: batch id, commit, command line, machine, versions."""
    return {
        "batch": new_batch_id(),
        "git_commit": git_commit(),
        "command": command_line(),
        "machine": machine_facts(),
        "versions": package_versions(),
        **extra,
    }


def append_row(path: Path, row: dict) -> None:
    """Append one JSON row (a finished run) to ``path``; the row is on disk before the next run starts."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fh.write(portable(json.dumps(row)) + "\n")


def read_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with path.open() as fh:
        return [json.loads(line) for line in fh if line.strip()]


def newest_batch(rows: Sequence[dict], **match: object) -> list[dict]:
    """The rows that match ``match`` (key=value) and share the batch id of the last such row appended."""
    matching = [r for r in rows if all(r.get(k) == v for k, v in match.items())]
    if not matching:
        return []
    batch = matching[-1]["batch"]
    return [r for r in matching if r["batch"] == batch]


def reproduces(a: dict, b: dict, keys: Sequence[str]) -> bool:
    """Whether two rows of the same run have every figure of ``keys`` present and equal (a deterministic rerun)."""
    return all(a.get(k) is not None and a.get(k) == b.get(k) for k in keys)


def with_reused(stored: Sequence[dict], rows: Sequence[dict], keys: Sequence[str], **match: object) -> list[dict]:
    """``rows`` (one batch) and the rows of the batches it names in ``reuses`` (those that match ``match``) for the
    (variant, seed) pairs it did not run. A reused batch lends its rows of a variant only where one of them is
    reproduced on ``keys`` by a row of the same variant and seed in ``rows`` or another reused batch: a row is
    reused only from code shown to give the same figures. Earlier-named batches first; oldest row first."""
    out = list(rows)
    named = list(rows[0].get("reuses") or []) if rows else []
    pool = [r for r in stored if r.get("batch") in named and all(r.get(k) == v for k, v in match.items())]
    for batch in named:
        older = [r for r in pool if r["batch"] == batch]
        for variant in dict.fromkeys(r["variant"] for r in older):
            mine = [r for r in older if r["variant"] == variant]
            others = [r for r in [*rows, *pool] if r["variant"] == variant and r.get("batch") != batch]
            if any(reproduces(m, o, keys) for m in mine for o in others if o["seed"] == m["seed"]):
                have = {r["seed"] for r in out if r["variant"] == variant}
                out += [r for r in mine if r["seed"] not in have]
    return sorted(out, key=lambda r: str(r.get("timestamp")))


def load1(load: str | None) -> float | None:
    """The 1-minute figure of a ``load_average()`` string."""
    try:
        return float(str(load).split("/")[0])
    except ValueError:
        return None


def cpu_models(rows: Sequence[dict]) -> str:
    """The CPU model the rows ran on; where batches ran on different ones, each with its batches (a figure
    from one host is not silently labelled with another's)."""
    batches_of: dict[str, list[str]] = {}
    for row in rows:
        cpu = str(row.get("machine", {}).get("cpu", "?"))
        batch = str(row.get("batch"))
        if batch not in batches_of.setdefault(cpu, []):
            batches_of[cpu].append(batch)
    if len(batches_of) == 1:
        return next(iter(batches_of))
    return ", ".join(f"{cpu} ({listed(b, 'batch', 'batches')})" for cpu, b in batches_of.items())


LISTED_AT_MOST = 3  # a rows block names up to this many commands, commits or batches; more are counted


def listed(items: Sequence[str], one: str, many: str) -> str:
    """``batch `a`, `b``` for a few items; ``12 batches, `a` to `z``` (first and last as given) for more: the
    rows in ``benchmarks/results/`` keep every one."""
    if len(items) <= LISTED_AT_MOST:
        return f"{one if len(items) == 1 else many} {', '.join(f'`{x}`' for x in items)}"
    return f"{len(items)} {many}, `{items[0]}` to `{items[-1]}`"


def rows_lines(rows: Sequence[dict], results: Path) -> list[str]:
    """The "every table says" block of a table rendered from stored rows: from the first run to end to the last
    (by timestamp: a table may group its rows in another order)."""
    ordered = sorted(rows, key=lambda r: str(r.get("timestamp", "")))
    first, last = ordered[0], ordered[-1]
    machine, versions = first.get("machine", {}), first.get("versions", {})
    commits = list(dict.fromkeys(str(r.get("git_commit")) for r in ordered))  # in the order they ran
    today = {as_run_today(str(r.get("command"))) for r in rows}
    commands = sorted(today, key=lambda c: (len(c), c))  # shortest first
    batches = list(dict.fromkeys(str(r.get("batch")) for r in ordered))
    loads = [v for v in (load1(r.get("load_after")) for r in rows) if v is not None]
    try:
        where = results.resolve().relative_to(REPO_ROOT)
    except ValueError:
        where = results
    load_text = fmt_mmm(loads, "{:.2f}") if loads else "-"
    shown = (
        ", ".join(f"`{c}`" for c in commands)
        if len(commands) <= LISTED_AT_MOST
        else (f"`{commands[0]}` and {len(commands) - 1} other invocations (each row keeps its own)")
    )
    return [
        f"- command: {shown}",
        f"- date: {first.get('timestamp')} to {last.get('timestamp')}; "
        f"frugalrl {listed(commits, 'commit', 'commits')}; results: `{where}`, {listed(batches, 'batch', 'batches')}",
        f"- machine: {cpus_text(machine.get('nproc', '?'), machine.get('cpus_total'))}, "
        f"{cpu_models(rows)} (`lscpu` model name), "
        f"GPU: {machine.get('gpu', '?')}",
        f"- versions: {', '.join(f'{k} {v}' for k, v in versions.items()) or 'not recorded'}",
        f"- load average (1/5/15 min) before the first run: {first.get('load_before')}; after the last: "
        f"{last.get('load_after')}; 1-min load after each run: {load_text}",
    ]


# --------------------------------------------------------------------------- one shape for every script's output
def add_output_args(parser: argparse.ArgumentParser, name: str) -> None:
    """``--results`` (default ``benchmarks/results/<name>.jsonl``), ``--report-only``, ``--write``, ``--check``."""
    parser.add_argument("--results", type=Path, default=RESULTS_DIR / f"{name}.jsonl",
                        help="per-run rows: appended to by a run, read by --report-only")  # fmt: skip
    parser.add_argument("--report-only", action="store_true", help="render from --results alone, run nothing")
    parser.add_argument("--write", action="store_true", help="put the table into docs/benchmarks.md")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 unless docs/benchmarks.md holds exactly this rendering")  # fmt: skip


def doc_section(name: str, path: Path = DOC_PATH) -> str | None:
    """The text between ``<!-- BEGIN name -->`` and ``<!-- END name -->`` in ``path`` (None: no such section)."""
    match = re.search(rf"<!-- BEGIN {re.escape(name)} -->\n(.*?)\n<!-- END {re.escape(name)} -->",
                      path.read_text(), re.DOTALL)  # fmt: skip
    return match.group(1) if match else None


PROSE_WIDTH = 110  # a rendered paragraph or list item longer than this is wrapped (tables and code are not)
_LIST_ITEM = re.compile(r"(\s*)([-*]|\d+\.) ")


def wrap_prose(text: str, width: int = PROSE_WIDTH) -> str:
    """``text`` with each long prose line wrapped at ``width`` columns; markdown renders it the same.

    Table rows, headings, fenced code and indented lines stay as they are; a list item's continuation lines
    are indented under its text. Code spans may break at a space (markdown reads the newline as one)."""
    lines, fenced = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        item = _LIST_ITEM.match(line)
        structure = line.startswith(("|", "#", "<", " ")) and not item  # a table, heading, HTML or indented code
        if fenced or structure or len(line) <= width:
            lines.append(line)
            continue
        indent = " " * len(item.group(0)) if item else ""
        lines += textwrap.wrap(line, width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)
    return "\n".join(lines)


def emit(name: str, text: str, args: argparse.Namespace, after: Sequence[str] = ()) -> None:
    """Print the section (prose wrapped, ``wrap_prose``); ``--write`` puts it into the doc (a new section after
    the first of ``after`` the doc has, see ``write_section``); ``--check`` exits 1 unless the doc holds it."""
    text = wrap_prose(text)
    print(text)
    if getattr(args, "write", False):
        write_section(name, text, after=after)
    if getattr(args, "check", False):
        check_section(name, text, args.results)


def check_section(name: str, text: str, results: Path) -> None:
    """Exit 1, with the difference, unless the doc's section ``name`` is exactly ``text``."""
    held = doc_section(name)
    if held != text.strip():
        import difflib

        diff = difflib.unified_diff((held or "").splitlines(), text.strip().splitlines(), "doc", "rendered",
                                    lineterm="", n=1)  # fmt: skip
        sys.exit(f"docs/benchmarks.md section {name} is not what {results} renders:\n" + "\n".join(diff))


def stamp(common: dict, **row: object) -> dict:
    """One finished run's row: the invocation's shared keys, the run's figures, load after and time."""
    return {**common, **row, "load_after": load_average(), "timestamp": utc_now()}


def no_rows(name: str) -> str:
    """The section of a benchmark whose results file has no rows yet (earlier figures are archived below it)."""
    return (
        f"_No rows in `benchmarks/results/{name}.jsonl` yet: nothing here can be re-rendered. Figures measured "
        "before per-run rows were kept, if any, follow below, marked as archived._"
    )


def run_or_render(
    name: str,
    args: argparse.Namespace,
    run: Callable[[argparse.Namespace], list[dict]],
    render: Callable[[list[dict], Path], str],
    select: Callable[[list[dict], argparse.Namespace], list[dict]] | None = None,
    after: Sequence[str] = (),
    empty: str | None = None,
) -> None:
    """The end of every benchmark's ``main``: a fresh run's rows, or with ``--report-only`` the kept rows that
    ``select`` picks from ``args.results`` (default: the newest batch), rendered, then printed / written /
    checked (``emit``). ``empty``: the section where there are no rows (default ``no_rows(name)``)."""
    if args.report_only:
        kept = read_rows(args.results)
        rows = select(kept, args) if select else newest_batch(kept)
    else:
        rows = run(args)
    text = render(rows, args.results) if rows else (no_rows(name) if empty is None else empty)
    emit(name, text, args, after=after)


# --------------------------------------------------------------------------- the paired statistic
# Contenders run side by side on the same seeds (or repeats, rounds), so every figure is compared two ways:
# the ratio of the two medians, and the median of the per-seed ratios (which cancels what a seed, or the
# machine's state during one pair of runs, does to both). These are the one implementation of both.
NAN = float("nan")


def ratio_of_medians(a: Iterable[float], b: Iterable[float], floor: float = 0.0) -> float:
    """``(median(a) - floor) / (median(b) - floor)``; nan where either side is empty or the divisor is 0."""
    a, b = list(a), list(b)
    if not a or not b or statistics.median(b) == floor:
        return NAN
    return (statistics.median(a) - floor) / (statistics.median(b) - floor)


@dataclass(frozen=True)
class Paired:
    """A figure of contender A against contender B, paired by seed: ``of_medians`` (A's median against B's)
    and ``per_seed`` (one value per pair). Ratios (``paired_ratio``) or differences (``paired_difference``)."""

    of_medians: float
    per_seed: list[float]

    @property
    def median(self) -> float:
        """The median of the per-seed values (nan without pairs)."""
        return statistics.median(self.per_seed) if self.per_seed else NAN

    @property
    def both(self) -> tuple[float, float]:
        """(of medians, median of per-seed): the pair every ratio cell and claim quotes."""
        return self.of_medians, self.median

    def text(self, fmt: str = "{:.2f}") -> str:
        """``of medians / median of per-seed``."""
        return f"{fmt.format(self.of_medians)} / {fmt.format(self.median)}"


def pair_up(a: Mapping[Hashable, float | None], b: Mapping[Hashable, float | None]) -> list[tuple[float, float]]:
    """(a[k], b[k]) for every key (a seed, a repeat) both have a value for, in ``a``'s order; None is no value."""
    return [(v, b[k]) for k, v in a.items() if v is not None and b.get(k) is not None]


def paired_ratio(
    pairs: Iterable[tuple[float, float]],
    floor: float = 0.0,
    medians: tuple[Iterable[float], Iterable[float]] | None = None,
) -> Paired:
    """A / B over ``pairs``: the ratio of medians and the per-seed ratios. ``floor`` is taken off both sides
    first (a return measured above a random policy); a pair whose B is at the floor has no ratio.
    ``medians``: the values the two medians are taken over, where runs without a partner count too
    (default: the pairs' own)."""
    pairs = list(pairs)
    tops, bottoms = medians if medians is not None else ([a for a, _ in pairs], [b for _, b in pairs])
    per_seed = [(a - floor) / (b - floor) for a, b in pairs if b != floor]
    return Paired(ratio_of_medians(tops, bottoms, floor), per_seed)


def paired_difference(pairs: Iterable[tuple[float, float]]) -> Paired:
    """A - B over ``pairs``: the difference of medians and the per-seed differences."""
    pairs = list(pairs)
    if not pairs:
        return Paired(NAN, [])
    of_medians = statistics.median(a for a, _ in pairs) - statistics.median(b for _, b in pairs)
    return Paired(of_medians, [a - b for a, b in pairs])


def by_seed(rows: Sequence[dict], contenders: Sequence[str], key: str = "contender") -> tuple[list[dict], list[int]]:
    """[{"seed": s, contender: row, ...}] for the seeds every contender ran (the later row wins a duplicate), by
    seed; and the seeds that lack one (a stopped comparison), left out of every paired figure."""
    seeds: dict[int, dict] = {}
    for row in rows:
        seeds.setdefault(row["seed"], {"seed": row["seed"]})[row[key]] = row
    complete = [entry for _, entry in sorted(seeds.items()) if all(c in entry for c in contenders)]
    return complete, sorted(s for s, entry in seeds.items() if not all(c in entry for c in contenders))


def ratio_cells(a: list[float | None], b: list[float | None], positive: bool = False) -> tuple[str, str]:
    """A / B as two table cells: the ratio of medians, and the median (min-max) of the per-seed ratios
    (``a[i]`` and ``b[i]`` are one seed's; None: no figure). ``positive``: returns, where a ratio only means
    something when both are above 0. A run whose partner has no figure still counts in its contender's median."""
    a_all = [x for x in a if x is not None]
    b_all = [y for y in b if y is not None]
    pairs = pair_up(dict(enumerate(a)), dict(enumerate(b)))
    if positive:
        pairs = [(x, y) for x, y in pairs if x > 0 and y > 0]
    ratio = paired_ratio(pairs, medians=(a_all, b_all))
    if a_all and b_all and (not positive or (statistics.median(a_all) > 0 and statistics.median(b_all) > 0)):
        of_medians = f"{ratio.of_medians:.2f}"
    else:
        of_medians = "n/a" + (" (median return <= 0)" if positive and a_all and b_all else "")
    if not pairs:
        return of_medians, "n/a"
    per_seed = fmt_mmm(ratio.per_seed, "{:.2f}")
    if len(pairs) < len(a):
        per_seed += f" [{len(pairs)}/{len(a)} seeds]"
    return of_medians, per_seed


def paired_ratios(pairs: Iterable[tuple[float, float]], floor: float = 0.0) -> tuple[float, float]:
    """(ratio of medians, median of per-seed ratios) of (A, B) pairs."""
    return paired_ratio(pairs, floor).both
