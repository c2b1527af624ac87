"""Top-k gradient fusion against a dense all-reduce and one worker, 2 gloo workers on this machine.

For each env and seed, one after another (``frugalrl train`` subprocesses, MLflow off):

1. ``single``  one worker, the env's PPO config as it is;
2. ``dense``   2 workers, dense all-reduce of the gradients;
3. ``topk``    2 workers, top-k fusion at each ``--topk`` fraction (fp16 values, int16/int32
               indices, error feedback).

The budget is ``--steps`` env steps per worker (2 workers see twice the data of one). Bytes are
counted from the buffers handed to the collectives; "dense-equivalent" is the float32 payload of
the same gradients. The seed claims 75% less communication and 2.8x distributed efficiency.

    python benchmarks/fusion.py --envs CartPole-v1 --seeds 3 --steps 50000 --write
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import _report

CONFIGS = {"CartPole-v1": "cartpole-ppo.yaml", "LunarLander-v3": "lunarlander-ppo.yaml"}


def run(env: str, seed: int, variant: str, topk: float, steps: int, episodes: int, root: Path) -> dict:
    out = root / f"{env}-{seed}-{variant}-{topk}"
    sets = ["tracking.enabled=false", f"seed={seed}", f"ppo.total_timesteps={steps}", f"eval.episodes={episodes}"]
    if variant != "single":
        sets += ["distributed.workers=2", f"distributed.mode={'dense' if variant == 'dense' else 'topk'}",
                 f"distributed.topk={topk}"]  # fmt: skip
    cmd = [sys.executable, "-m", "frugalrl.cli", "train", str(_report.REPO_ROOT / "configs" / CONFIGS[env]),
           "--out", str(out), *[a for s in sets for a in ("--set", s)]]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{env} {variant} seed {seed}: {proc.stderr.strip().splitlines()[-1:]}")
    summary = json.loads((out / "summary.json").read_text())
    steps_all = summary.get("real_env_steps_all_workers", summary["real_env_steps"])
    row = {
        "env": env, "seed": seed, "variant": variant if variant != "topk" else f"topk {topk:g}",
        "eval_mean": summary["eval_mean"], "bytes_sent": summary.get("bytes_sent", 0.0),
        "dense_bytes": summary.get("dense_equivalent_bytes", 0.0), "steps_all": steps_all,
        "sps": steps_all / summary["wall_s"], "wall_s": summary["wall_s"],
    }  # fmt: skip
    print(f"{env:<14} seed {seed} {row['variant']:<10} eval {row['eval_mean']:8.1f}  sent {row['bytes_sent']:>14,.0f}"
          f"  dense {row['dense_bytes']:>14,.0f}  sps {row['sps']:7.0f}", flush=True)  # fmt: skip
    return row


def report(rows: list[dict], command: str, load_start: str, load_end: str, args: argparse.Namespace) -> str:
    lines = _report.machine_lines(
        command,
        load_start,
        load_end,
        [
            f"budget: {args.steps:,} env steps per worker (2 workers: twice the data of one); "
            f"{args.eval_episodes} evaluation episodes",
            "workers: 2 gloo processes on this 2-core machine, one torch thread each",
            "bytes: counted from the buffers each worker hands to all_gather / all_reduce, per worker; "
            "dense-equivalent: the float32 payload of the same gradients",
            "top-k: fp16 values, int16 indices (int32 for tensors above 32,767 entries), error feedback, beta 0",
            "steps/s: env steps of all workers per second of wall-clock",
        ],
    )
    parts = ["\n".join(lines)]
    for env in dict.fromkeys(r["env"] for r in rows):
        mine = [r for r in rows if r["env"] == env]
        dense_eval = statistics.median(r["eval_mean"] for r in mine if r["variant"] == "dense")
        table = []
        for variant in dict.fromkeys(r["variant"] for r in mine):
            sel = [r for r in mine if r["variant"] == variant]
            sent = statistics.median(r["bytes_sent"] for r in sel)
            dense = statistics.median(r["dense_bytes"] for r in sel)
            evals = [r["eval_mean"] for r in sel]
            table.append([
                variant, len(sel), _report.fmt_mmm(evals, "{:.1f}"),
                f"{statistics.median(evals) / dense_eval:.3f}" if dense_eval else "-",
                f"{sent:,.0f}" if sent else "-", f"{(1 - sent / dense) * 100:.1f}%" if dense else "-",
                f"{dense / sent:.1f}x" if sent else "-", f"{statistics.median(r['sps'] for r in sel):,.0f}",
            ])  # fmt: skip
        header = ["variant", "seeds", "eval return", "return / dense", "bytes sent per worker",
                  "fewer bytes than dense", "compression", "steps/s (all workers)"]  # fmt: skip
        parts.append(f"**{env}**\n\n" + _report.markdown_table(header, table))
    return "\n\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1"], choices=list(CONFIGS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=50_000, help="env steps per worker")
    parser.add_argument("--topk", type=float, nargs="+", default=[0.2, 0.01])
    parser.add_argument("--eval-episodes", type=int, default=20)
    parser.add_argument("--results", type=Path, default=Path(tempfile.gettempdir()) / "fusion.json")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    command = _report.command_line()
    load_start = _report.load_average()
    if args.report_only:
        rows = json.loads(args.results.read_text())
    else:
        rows = []
        with tempfile.TemporaryDirectory() as tmp:
            for env in args.envs:
                for seed in range(1, args.seeds + 1):
                    variants = [("single", 1.0), ("dense", 1.0), *[("topk", k) for k in args.topk]]
                    for variant, topk in variants:
                        rows.append(run(env, seed, variant, topk, args.steps, args.eval_episodes, Path(tmp)))
                        args.results.write_text(json.dumps(rows, indent=1))
    text = report(rows, command, load_start, _report.load_average(), args)
    print(text)
    if args.write:
        _report.write_section("fusion", text)


if __name__ == "__main__":
    main()
