"""The RAM probe's CNN ceiling, computed and cached: the quick demo's encoder stage, cold and warm.

    python -m benchmarks.probe_cache [--repeats 1]

Runs ``frugalrl pretrain encoder`` with the quick profile's latent overrides twice per repeat
in a fresh cache directory: first with an empty cache (the ceiling is trained), then with the
ceiling cached by the first run. Wall-clock from outside the process, the run's own ``wall_s``,
and the figures (which must be equal). Rows go to ``benchmarks/results/probe_cache.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

from . import _harness, _report
from ._report import REPO_ROOT, median_of

QUICK = ["total_real_steps=8192", "latent.collect_steps=2048", "latent.pretrain_updates=100", "eval.episodes=2",
         "env.atari.max_episode_steps=10000", "tracking.enabled=false"]  # fmt: skip


def _pretrain(out: Path, cache: Path) -> dict:
    config = REPO_ROOT / "configs" / "breakout-latent.yaml"
    # the config's threads (the quick demo's); wall-clock from outside the process, start-up included
    run = _harness.cli(["pretrain", "encoder", "-c", config, "-o", out], out, QUICK, threads=None,
                       env={"FRUGALRL_CACHE_DIR": str(cache)})  # fmt: skip
    summary = run.summary
    return {"wall_s": round(run.wall_s, 2), "run_wall_s": summary["wall_s"],
            "ceiling_cached": summary["ceiling_cached"], "ball_ceiling_r2": summary["ball_ceiling_r2"],
            "ball_r2_mlp": summary["ball_r2_mlp"]}  # fmt: skip


def render(rows: list[dict], results: Path) -> str:
    cold = [r for r in rows if r["kind"] == "cold"]
    cached = [r for r in rows if r["kind"] == "cached"]

    med = median_of

    def same(key: str) -> str:
        return "same" if {r[key] for r in rows} == {rows[0][key]} else "differ"

    table = [
        ["ceiling trained (cold)", f"{med(cold, 'wall_s'):.1f} s", f"{med(cold, 'run_wall_s'):.1f} s",
         f"{med(cold, 'ball_ceiling_r2'):.4f}", f"{med(cold, 'ball_r2_mlp'):.4f}"],
        ["ceiling cached", f"{med(cached, 'wall_s'):.1f} s", f"{med(cached, 'run_wall_s'):.1f} s",
         f"{med(cached, 'ball_ceiling_r2'):.4f}", f"{med(cached, 'ball_r2_mlp'):.4f}"],
        ["cached / cold", f"**{med(cached, 'wall_s') / med(cold, 'wall_s'):.2f}x**",
         f"{med(cached, 'run_wall_s') / med(cold, 'run_wall_s'):.2f}x", same("ball_ceiling_r2"), same("ball_r2_mlp")],
    ]  # fmt: skip
    repeats = len(cold)
    note = (
        "one repeat, so the ratio of medians and the median of per-run ratios are the same figure"
        if repeats == 1
        else f"{repeats} repeats; ratios of medians"
    )
    header = ["run", "wall-clock (outside)", "run's own wall_s", "ball ceiling R^2", "ball probe R^2 (MLP)"]
    return "\n".join([
        *_report.rows_lines(rows, results),
        f"- `frugalrl pretrain encoder` with the quick profile's latent overrides, first with an empty cache, then "
        f"with the ceiling cached by the first run; {note}",
        "",
        _report.markdown_table(header, table),
    ])  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    _report.add_output_args(parser, "probe_cache")
    args = parser.parse_args()

    def run(args: argparse.Namespace) -> list[dict]:
        common = _report.batch_common()
        works = {r: Path(tempfile.mkdtemp(prefix="probe-cache-")) for r in range(args.repeats)}  # a cache per repeat

        def one(job: tuple[int, str]) -> dict:
            repeat, kind = job
            return {"repeat": repeat, "kind": kind, **_pretrain(works[repeat] / kind, works[repeat])}

        def line(row: dict) -> str:
            return json.dumps({k: row[k] for k in ("kind", "wall_s", "ball_ceiling_r2")})

        try:  # cold, then cached by the cold run, in every repeat
            return _harness.measure(_harness.interleave(works, ("cold", "cached")), one, args.results, common, line)
        finally:
            for work in works.values():
                shutil.rmtree(work, ignore_errors=True)

    _report.run_or_render("probe_cache", args, run, render)


if __name__ == "__main__":
    main()
