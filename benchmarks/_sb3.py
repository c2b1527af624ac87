"""What the scripts that time frugalrl against Stable-Baselines3 share (``ppo_vs_sb3``, ``offpolicy_vs_sb3``).

- ``preimport``: what either learner would otherwise import lazily inside the timed region, imported first;
- ``refusals``: the frugalrl settings that no SB3 learner has a counterpart for (a script refuses to run SB3
  on them instead of training something else);
- ``continuous``: whether an env's actions are continuous;
- ``eval_returns``: a trained SB3 model scored as frugalrl's evaluator scores a run: episode i reset with
  seed ``EVAL_SEED`` + i;
- ``describe``: SB3's keyword arguments as a rendered section names them;
- ``figure_row`` / ``header_lines`` / ``summary_table`` / ``RATIOS_LINE`` / ``section``: a row of a section's
  summary table, the section's first lines, the summary table, the line saying what the ratios are, and the
  section put together.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from . import _harness, _report

EVAL_SEED = 10_000  # episode i of every final evaluation, both sides, is reset with seed EVAL_SEED + i


def preimport(env_id: str) -> None:
    """Import what would otherwise be imported lazily inside the timed region, for both contenders alike.

    ``torch.optim.Optimizer.__init__`` imports ``torch._dynamo`` on first use (about 2 s here); both
    learners build an Adam optimizer, so both would pay it. The env's module (Box2D, MuJoCo bindings)
    is imported on the first ``gym.make``. Imports are kept out of the timed figure.
    """
    import importlib

    import gymnasium as gym
    import torch._dynamo  # noqa: F401

    entry = gym.spec(env_id).entry_point
    if isinstance(entry, str):
        importlib.import_module(entry.split(":")[0])


def refusals(cfg: Any, algo: str) -> list[str]:
    """What in the frugalrl config ``cfg`` no SB3 learner of ``algo`` has a counterpart for (empty: none)."""
    env, pol = cfg.env, cfg.policy
    problems = []
    if cfg.algo != algo:
        problems.append(f"algo {cfg.algo}")
    if env.kwargs:
        problems.append(f"env.kwargs {env.kwargs}")
    if env.frame_stack != 1:
        problems.append(f"env.frame_stack {env.frame_stack}")
    if env.dynamics.changed:
        problems.append("env.dynamics")
    if pol.kind == "cnn" or pol.block != "plain" or pol.adapter is not None:
        problems.append(f"policy kind {pol.kind} / block {pol.block} / adapter {pol.adapter}")
    if cfg.selection.kind != "all" or cfg.latent_curriculum or cfg.meta.kind != "fixed" or cfg.score_stages.stages:
        problems.append("sample selection / latent curriculum / meta-controller / score stages")
    return problems


def continuous(env_id: str) -> bool:
    import gymnasium as gym

    env = gym.make(env_id)
    try:
        return isinstance(env.action_space, gym.spaces.Box)
    finally:
        env.close()


def eval_returns(env_id: str, act: Callable[[Any], Any], episodes: int) -> list[float]:
    """The returns of ``episodes`` episodes of ``act(obs) -> action`` on a fresh ``gym.make(env_id)``, episode i
    reset with seed ``EVAL_SEED + i`` (what frugalrl's evaluator does)."""
    import gymnasium as gym

    env = gym.make(env_id)
    try:
        return _harness.episode_returns(env, act, episodes, EVAL_SEED)
    finally:
        env.close()


def describe(described: dict[str, Any]) -> str:
    """``k=v, ...``, a nested dict as ``dict(k=v, ...)``."""

    def text(value: Any) -> str:
        if isinstance(value, dict):
            return "dict(" + ", ".join(f"{k}={text(v)}" for k, v in value.items()) + ")"
        return str(value)

    return ", ".join(f"{k}={text(v)}" for k, v in described.items())


def figure_row(figure: str, a: list, b: list, fmt: str, positive: bool = False) -> list[str]:
    """A summary-table row: the figure, frugalrl's and SB3's median (min-max), and the two ratios (``a[i]`` and
    ``b[i]`` are one seed's; None: no figure; ``positive``: returns, a ratio only where both are above 0). An SB3
    figure of 0 (no gradient steps in a short run) gives no ratios."""
    if any(v == 0 for v in b if v is not None) and not positive:
        of_medians, per_seed = "n/a (SB3: 0)", "n/a"
    else:
        of_medians, per_seed = _report.ratio_cells(a, b, positive)
    return [
        figure,
        _report.mmm([v for v in a if v is not None], fmt),
        _report.mmm([v for v in b if v is not None], fmt),
        of_medians,
        per_seed,
    ]


def header_lines(rows: Sequence[dict], name: str) -> list[str]:
    """A section's first lines: command, date, commit and batch, machine, versions, load (``rows``: one batch, in
    the order they ran; ``name``: the results file's name)."""
    first, last = rows[0], rows[-1]
    machine, versions = first.get("machine", {}), first.get("versions", {})
    commits = sorted({r["git_commit"] for r in rows})
    commands = sorted({_report.as_run_today(r["command"]) for r in rows})
    loads = [v for v in (_report.load1(r["load_after"]) for r in rows) if v is not None]
    return [
        f"- command: {', '.join(f'`{c}`' for c in commands)}",
        f"- date: {first['timestamp']} to {last['timestamp']}; frugalrl commit {', '.join(commits)}; "
        f"results: `benchmarks/results/{name}.jsonl`, batch `{first['batch']}`",
        f"- machine: {_report.cpus_text(machine.get('nproc', '?'), machine.get('cpus_total'))}, "
        f"{cpus_by_seed(rows)} (`lscpu` model name), "
        f"GPU: {machine.get('gpu', '?')}",
        f"- versions: {', '.join(f'{k} {v}' for k, v in versions.items())}",
        f"- load average (1/5/15 min) at start: {first['load_before']}; at end: {last['load_after']}; "
        f"1-min load after each run: {_report.mmm(loads, '{:.2f}')}",
    ]


def cpus_by_seed(rows: Sequence[dict]) -> str:
    """The CPU model the rows ran on; where a batch went on on another host (``--resume``), each model with its
    seeds: both runs of a seed always share one host, so each per-seed ratio is one host's."""
    seeds_of: dict[str, list[int]] = {}
    for row in rows:
        seeds = seeds_of.setdefault(str(row.get("machine", {}).get("cpu", "?")), [])
        if row["seed"] not in seeds:
            seeds.append(row["seed"])
    if len(seeds_of) == 1:
        return next(iter(seeds_of))
    return ", ".join(f"{cpu} ({'seed' if len(s) == 1 else 'seeds'} {', '.join(map(str, s))})"
                     for cpu, s in seeds_of.items())  # fmt: skip


RATIOS_LINE = (
    "- ratios are frugalrl / SB3 (below 1: frugalrl is faster, or has the lower return); 'ratio of medians' "
    "divides the two medians, 'per seed' takes the median (min-max) of the paired per-seed ratios; a return "
    "ratio is only given where both returns are above 0."
)
SUMMARY_HEADER = (
    "figure, median (min-max)",
    "frugalrl",
    "Stable-Baselines3",
    "frugalrl / SB3: ratio of medians",
    "frugalrl / SB3: per seed, median (min-max)",
)


def summary_table(rows: Sequence[Sequence[str]]) -> str:
    """The section's summary table: one ``figure_row`` (or a row of the same five cells) per figure."""
    return _report.markdown_table(SUMMARY_HEADER, rows)


def section(title: str, lines: Sequence[str], target: str, summary: str, per_seed: str) -> str:
    """A section: its title line, the lines saying how it was measured, the target's verdict, the summary table,
    then the per-seed table."""
    return "\n".join([title, "", *lines, "", target, "", summary, "", "Per seed:", "", per_seed])
