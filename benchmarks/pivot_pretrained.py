"""PivotRL on CartPole with a pretrained evaluator: do 5 of 5 seeds still reach an eval return of 475?

The check: "with a pretrained evaluator (10k steps) and the default min_full_fraction, 5 of 5 CartPole
seeds reach eval >= 475 within 100k steps". It was written after PivotRL collapsed on CartPole with a
pretrained evaluator (docs/production.md: eval 9.2 on two of three seeds) under the biased rule.

1. One evaluator is pretrained: ``frugalrl pretrain evaluator --config configs/cartpole-pivot.yaml``
   with ``selection.settings.evaluator.pretrain_steps=10000`` (baseline PPO, the config's seed), MLflow
   off, one thread, written into a temporary directory (``--evaluator PATH`` uses a given one instead).
2. For seeds 1..N, ``configs/cartpole-pivot.yaml`` trains from that evaluator
   (``selection.settings.evaluator_from``), MLflow off, one thread, each run a fresh ``frugalrl train``
   process, in this order per seed:

   * ``unbiased``   the config as is (kept samples packed into full minibatches,
                    ``selection.settings.p_min`` 0.1);
   * ``biased``     ``selection.settings.p_min=0``: the low band skipped (rank scores, packed);
   * ``biased_mb``  (``--minibatch``) ``selection.settings.p_min=0``, ``selection.packing=minibatch``,
                    ``selection.settings.score=raw``: the rule exactly as first built (thinned minibatches,
                    as many optimizer steps as PPO).

Reported per variant: the eval return of every seed (20 deterministic episodes), seeds >= 475, the median,
pivot's kept fraction (``backward_samples / (real_env_steps * update_epochs)``, update_epochs from the
resolved config: 20), optimizer steps and train wall-clock (``summary.json`` ``wall_s - eval_s``: agent
construction, rollouts, updates, evaluator work, checkpoints and policy export, final evaluation excluded).
Verdict: met when ``unbiased`` has 5 of 5 seeds >= 475 at the default budgets.

Every run (the pretraining too) appends one JSON row to ``benchmarks/results/pivot_pretrained.jsonl`` as
soon as it finishes (same conventions as ``pivot_vs_ppo.py``: a ``batch`` id per invocation, load
average before/after, timestamp, git commit, command line). ``--report-only`` renders the newest batch
from that file without running anything; ``--write`` puts the section ``pivot_pretrained`` into
``docs/benchmarks.md`` (right after ``pivot_vs_ppo`` when the file has no such section yet).

Run from the repository root (run times on 2 cores are estimates, not measured end to end: smoke runs took
about 3-4 s per run of process start, setup and evaluation, plus about 115 us per env step for pivot on
CartPole, so a 100k-step run about 15-20 s and 15 runs about 5 minutes)::

    nohup python -m benchmarks.pivot_pretrained --minibatch --write > /tmp/pivot_pretrained.log 2>&1 &
        # about 5-10 minutes
    python -m benchmarks.pivot_pretrained --report-only --write
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import yaml

from . import _harness, _report
from ._pivot import run_figures
from ._report import mmm

CONFIG = _report.REPO_ROOT / "configs" / "cartpole-pivot.yaml"
SECTION = "pivot_pretrained"
AFTER = ("pivot_vs_ppo",)
ENV_ID = "CartPole-v1"
VARIANTS = {
    "unbiased": [],
    "biased": ["selection.settings.p_min=0"],
    "biased_mb": ["selection.settings.p_min=0", "selection.packing=minibatch", "selection.settings.score=raw"],
}
DESCRIPTIONS = {
    "unbiased": "`unbiased`: the config as is",
    "biased": "`biased`: `selection.settings.p_min=0`",
    "biased_mb": "`biased_mb`: `selection.settings.p_min=0`, `selection.packing=minibatch`, "
    "`selection.settings.score=raw` (as first built)",
}
THRESHOLD = 475.0
TARGET_SEEDS = 5
PRETRAIN_STEPS = 10_000
PRETRAIN_KEYS = ("spearman", "spearman_before", "train_samples", "test_samples", "samples", "real_env_steps",
                 "wall_s", "evaluator_label", "evaluator_epochs", "evaluator_parameters", "dataset_sha256")  # fmt: skip


def config_defaults() -> dict:
    cfg = yaml.safe_load(CONFIG.read_text())
    pivot = cfg["selection"]["settings"]  # the pivot selector's own settings
    return {"timesteps": int(cfg["ppo"]["total_timesteps"]), "min_full_fraction": pivot["min_full_fraction"]}


def pretrain(common: dict, steps: int, workdir: Path, results: Path) -> dict:
    """Pretrain one evaluator with the CLI; writes and returns its row (``evaluator`` is the file)."""

    def figures(out: Path) -> dict:
        run = _harness.cli(["pretrain", "evaluator", "--config", CONFIG, "--out", out], out,
                           [f"selection.settings.evaluator.pretrain_steps={steps}"])  # fmt: skip
        summary = run.summary
        return {"env": ENV_ID, "config": str(CONFIG.relative_to(_report.REPO_ROOT)), "variant": "pretrain",
                "seed": summary.get("seed"), "overrides": run.sets, "pretrain_steps": steps,
                **{k: summary.get(k) for k in PRETRAIN_KEYS}, "evaluator": str(out / "evaluator.pt")}  # fmt: skip

    def line(row: dict) -> str:
        return f"pretrained evaluator: {steps:,} steps, held-out Spearman {row['spearman']:.3f}, {row['wall_s']:.1f} s"

    return _harness.measure([workdir / "evaluator"], figures, results, common, line)[0]


def run_all(args: argparse.Namespace, common: dict, workdir: Path) -> None:
    if args.evaluator:
        evaluator = str(args.evaluator.resolve())
        evaluator_info = {"evaluator": evaluator, "pretrain_steps": None}
    else:
        row = pretrain(common, args.pretrain_steps, workdir, args.results)
        evaluator = row["evaluator"]
        evaluator_info = {"evaluator": evaluator, "pretrain_steps": args.pretrain_steps, "spearman": row["spearman"]}
    scale = [f"ppo.total_timesteps={args.timesteps}"] if args.timesteps else []
    variants = [v for v in VARIANTS if v != "biased_mb" or args.minibatch]

    def figures(job: tuple[int, str]) -> dict:
        seed, variant = job
        overrides = [f"seed={seed}", *scale, f"selection.settings.evaluator_from={evaluator}", *VARIANTS[variant]]
        row = run_figures(ENV_ID, CONFIG, seed, variant, overrides, workdir, evaluator_info)
        epochs = row["settings"]["ppo"]["update_epochs"]
        return {**row, "kept_fraction": row["backward_samples"] / (row["real_env_steps"] * epochs)}

    def line(row: dict) -> str:
        return (f"seed {row['seed']}  {row['variant']:<9} eval {row['eval_mean']:6.1f}  "
                f"kept {row['kept_fraction']:.3f}  opt steps {row['optimizer_steps']}  train_s {row['train_s']:6.1f}  "
                f"load {row['load_after']}")  # fmt: skip

    _harness.measure(_harness.interleave(range(1, args.seeds + 1), variants), figures, args.results, common, line)


# --------------------------------------------------------------------------- report
def render(rows: list[dict], results: Path) -> str:
    pre = [r for r in rows if r["variant"] == "pretrain"]
    runs = {(r["variant"], r["seed"]): r for r in rows if r["variant"] in VARIANTS}  # a later row wins
    if not runs:
        raise ValueError(f"no training rows in batch {rows[0]['batch']}")
    defaults = config_defaults()
    first = next(iter(runs.values()))
    timesteps = first["timesteps"]
    pretrain_steps = first.get("pretrain_steps")
    min_full = sorted({r["settings"]["pivot"].get("min_full_fraction") for r in runs.values()})

    header = ["variant", "seeds", "eval return per seed", f"seeds >= {THRESHOLD:.0f}", "eval return, median (min-max)",
              "kept fraction, median (min-max)", "optimizer steps, median (min-max)",
              "train wall-clock s, median (min-max)"]  # fmt: skip
    body, hits = [], {}
    for variant in VARIANTS:
        mine = [r for (v, _), r in sorted(runs.items()) if v == variant]
        if not mine:
            continue
        returns = [r["eval_mean"] for r in mine]
        hits[variant] = (sum(v >= THRESHOLD for v in returns), len(mine))
        opt = [r["optimizer_steps"] for r in mine if r.get("optimizer_steps") is not None]
        used = mine[0]["settings"]
        described = f"{DESCRIPTIONS[variant]} (packing {used['selection']['packing']}, p_min {used['pivot']['p_min']})"
        body.append([
            described, str(len(mine)), " / ".join(f"{r['eval_mean']:.1f}" for r in mine),
            f"{hits[variant][0]}/{len(mine)}", mmm(returns, "{:.1f}"),
            mmm([r["kept_fraction"] for r in mine], "{:.3f}"), mmm(opt, "{:,.0f}") if opt else "-",
            mmm([r["train_s"] for r in mine], "{:.1f}"),
        ])  # fmt: skip
    table = _report.markdown_table(header, body)

    notes = []
    if timesteps != defaults["timesteps"]:
        notes.append(f"budget {timesteps:,} env steps, not {defaults['timesteps']:,}")
    if pretrain_steps != PRETRAIN_STEPS:
        notes.append(
            "a given evaluator" if pretrain_steps is None else f"evaluator pretrained on {pretrain_steps:,} env steps"
        )
    if min_full != [defaults["min_full_fraction"]]:
        notes.append(f"min_full_fraction {min_full}")
    goal = (
        f"with a pretrained evaluator ({PRETRAIN_STEPS:,} steps) and the default min_full_fraction "
        f"({defaults['min_full_fraction']}), {TARGET_SEEDS} of {TARGET_SEEDS} seeds reach eval >= {THRESHOLD:.0f} "
        f"within {defaults['timesteps']:,} steps (variant `unbiased`)"
    )
    if "unbiased" not in hits:
        measured, ok = "`unbiased` not run", False
    else:
        k, n = hits["unbiased"]
        ok = n >= TARGET_SEEDS and k == n
        measured = f"{k}/{n} seeds >= {THRESHOLD:.0f}"
        if n < TARGET_SEEDS:
            measured += f", only {n} seed(s) run, the check counts {TARGET_SEEDS}"
    others = "; ".join(f"`{v}` {k}/{n}" for v, (k, n) in hits.items() if v != "unbiased")
    verdict = f"**Check: {goal}. Measured: {measured}: {'met' if ok else 'missed'}.**"
    if others:
        verdict += f" For comparison: {others}."
    if notes:
        verdict += f" ({'; '.join(notes)}: not the check as stated.)"

    if pre:
        p = pre[-1]
        evaluator_line = (
            f"- evaluator: `frugalrl pretrain evaluator --config {p['config']}` with "
            f"{', '.join(f'`{o}`' for o in p['overrides'])}: {p.get('real_env_steps') or 0:,} env steps of baseline "
            f"PPO (seed {p['seed']}), {p.get('train_samples')} / {p.get('test_samples')} train / held-out samples, "
            f"held-out Spearman {p['spearman']:.3f} (before fitting {p.get('spearman_before', float('nan')):.3f}), "
            f"{p['wall_s']:.1f} s; one evaluator for every run below."
        )
    else:
        evaluator_line = f"- evaluator: given, `{first.get('evaluator')}`; one evaluator for every run below."
    settings = first["settings"]
    lines = [
        "Does PivotRL on CartPole still learn when it starts from a pretrained evaluator? (With the rule as first "
        "built it collapsed to eval 9.2 on two of three seeds at 41k steps; see docs/production.md.)",
        "",
        *_report.rows_lines(rows, results),
        evaluator_line,
        f"- training: `{first['config']}` ({timesteps:,} env steps, {settings['num_envs']} envs x "
        f"{settings['ppo']['num_steps']} steps, minibatch {settings['ppo']['batch_size']}, "
        f"{settings['ppo']['update_epochs']} epochs; pivot min_full_fraction {', '.join(map(str, min_full))}) with "
        "`selection.settings.evaluator_from=<that evaluator>`, MLflow off, one torch thread, each run a fresh "
        "`frugalrl train` process; per seed in the order of the table.",
        "- eval return: 20 deterministic episodes on fixed seeds (`summary.json` `eval_mean`); kept fraction: "
        "`backward_samples / (real_env_steps * update_epochs)`, warm-up included; train wall-clock: `wall_s - "
        "eval_s` (agent construction, rollouts, updates, evaluator work, checkpoints, policy export).",
        "- Other processes may share the machine; see the load average.",
        "",
        verdict,
        "",
        table,
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=TARGET_SEEDS, help="seeds 1..N")
    parser.add_argument("--timesteps", type=int, default=None, help="training budget (default: the config's 100k)")
    parser.add_argument("--pretrain-steps", type=int, default=PRETRAIN_STEPS, help="env steps to pretrain on")
    parser.add_argument("--evaluator", type=Path, default=None, help="use this evaluator.pt, pretrain none")
    parser.add_argument("--minibatch", action="store_true", help="also run `biased_mb` (the rule as first built)")
    _report.add_output_args(parser, SECTION)
    args = parser.parse_args()

    def run(args: argparse.Namespace) -> list[dict]:
        common = _report.batch_common()
        with tempfile.TemporaryDirectory(prefix="pivot-pretrained-") as tmp:
            run_all(args, common, Path(tmp))
        return [r for r in _report.read_rows(args.results) if r.get("batch") == common["batch"]]

    _report.run_or_render(SECTION, args, run, render, lambda rows, _: _report.newest_batch(rows, env=ENV_ID),
                          after=AFTER)  # fmt: skip


if __name__ == "__main__":
    main()
