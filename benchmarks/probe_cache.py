"""The RAM probe's CNN ceiling, computed and cached: the quick demo's encoder stage, cold and warm.

    python benchmarks/probe_cache.py [--repeats 1]

Runs ``frugalrl pretrain encoder`` with the quick profile's latent overrides twice per repeat
in a fresh cache directory: first with an empty cache (the ceiling is trained), then with the
ceiling cached by the first run. Wall-clock from outside the process, the run's own ``wall_s``,
and the figures (which must be equal). Rows go to ``benchmarks/results/probe_cache.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _report import REPO_ROOT, cpu_model, git_commit, load_average

QUICK = ["total_real_steps=8192", "latent.collect_steps=2048", "latent.pretrain_updates=100", "eval.episodes=2",
         "env.atari.max_episode_steps=10000", "tracking.enabled=false"]  # fmt: skip


def _pretrain(out: Path, cache: Path) -> dict:
    sets = [arg for item in QUICK for arg in ("--set", item)]
    env = {**os.environ, "FRUGALRL_CACHE_DIR": str(cache)}
    command = [sys.executable, "-m", "frugalrl", "pretrain", "encoder", "-c", "configs/breakout-latent.yaml",
               "-o", str(out), *sets]  # fmt: skip
    started = time.perf_counter()
    subprocess.run(command, cwd=REPO_ROOT, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - started
    summary = json.loads((out / "summary.json").read_text())
    return {"wall_s": round(wall, 2), "run_wall_s": summary["wall_s"], "ceiling_cached": summary["ceiling_cached"],
            "ball_ceiling_r2": summary["ball_ceiling_r2"], "ball_r2_mlp": summary["ball_r2_mlp"]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    rows = []
    for repeat in range(args.repeats):
        work = Path(tempfile.mkdtemp(prefix="probe-cache-"))
        try:
            for kind in ("cold", "cached"):
                row = {"repeat": repeat, "kind": kind, "load_before": load_average(), **_pretrain(work / kind, work)}
                rows.append(row)
                print(json.dumps(row))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    out = REPO_ROOT / "benchmarks" / "results" / "probe_cache.json"
    record = {"command": " ".join(["python benchmarks/probe_cache.py", *sys.argv[1:]]), "commit": git_commit(),
              "cpu": cpu_model(), "load_after": load_average(), "rows": rows}  # fmt: skip
    out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"rows: {out}")


if __name__ == "__main__":
    main()
