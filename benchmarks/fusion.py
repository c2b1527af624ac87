"""Top-k gradient fusion against a dense all-reduce and one worker, 2 gloo workers on this machine.

For each env and seed, one after another (``frugalrl train`` subprocesses, MLflow off):

1. ``single``  one worker, the env's PPO config as it is;
2. ``dense``   2 workers, dense all-reduce of the gradients;
3. ``topk``    2 workers, top-k fusion at each ``--topk`` fraction (fp16 values, int16/int32
               indices, error feedback).

The budget is ``--steps`` env steps per worker (2 workers see twice the data of one). Bytes are
counted from the buffers handed to the collectives; "dense-equivalent" is the float32 payload of
the same gradients. The seed claims 75% less communication and 2.8x distributed efficiency.

    python -m benchmarks.fusion --envs CartPole-v1 --seeds 3 --steps 50000 --write
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from . import _harness, _report
from ._report import median_of

CONFIGS = {"CartPole-v1": "cartpole-ppo.yaml", "LunarLander-v3": "lunarlander-ppo.yaml"}


def run(env: str, seed: int, variant: str, topk: float, steps: int, episodes: int, root: Path) -> dict:
    out = root / f"{env}-{seed}-{variant}-{topk}"
    sets = [f"seed={seed}", f"ppo.total_timesteps={steps}", f"eval.episodes={episodes}"]
    if variant != "single":
        # dense reads no share: it sends every entry
        share = [f"distributed.settings.share={topk}"] if variant == "topk" else []
        sets += ["distributed.workers=2", f"distributed.kind={variant}", *share]
    # threads as the config has them: the 2 gloo workers are 2 processes
    summary = _harness.train(_report.REPO_ROOT / "configs" / CONFIGS[env], out, sets, threads=None).summary
    steps_all = summary.get("real_env_steps_all_workers", summary["real_env_steps"])
    row = {
        "env": env, "seed": seed, "variant": variant if variant != "topk" else f"topk {topk:g}",
        "workers": summary.get("workers", 1), "config_hash": summary["config_hash"],
        "eval_mean": summary["eval_mean"], "bytes_sent": summary.get("bytes_sent", 0.0),
        "dense_bytes": summary.get("dense_equivalent_bytes", 0.0),
        "wire_bytes": summary.get("wire_bytes_per_worker", 0.0), "steps_all": steps_all,
        "sps": steps_all / summary["wall_s"], "wall_s": summary["wall_s"],
        "total_flops": summary["total_flops"],
        "sync_flops": summary.get("flops_by_phase", {}).get("gradient_sync", {}).get("flops", 0.0),
        **{k: summary.get(f"fusion_{k}", 0.0) for k in ("encode_s", "comm_s", "decode_s")},
    }  # fmt: skip
    return row


def line(row: dict) -> str:
    return (f"{row['env']:<14} seed {row['seed']} {row['variant']:<10} eval {row['eval_mean']:8.1f}  sent "
            f"{row['bytes_sent']:>14,.0f}  wire {row['wire_bytes']:>14,.0f}  sps {row['sps']:7.0f}")  # fmt: skip


def report(rows: list[dict], results: Path) -> str:
    first = rows[0]
    lines = [*_report.rows_lines(rows, results), *[f"- {line}" for line in [
        f"budget: {first['steps']:,} env steps per worker (2 workers: twice the data of one); "
        f"{first['eval_episodes']} evaluation episodes",
        "workers: 2 gloo processes on this 2-core machine, one torch thread each",
        "payload: the bytes each worker hands to all_gather / all_reduce; dense-equivalent: the float32 payload "
        "of the same gradients; on the wire: what a worker sends under the ring algorithms gloo and NCCL use "
        "(all_reduce 2(W-1)/W x payload, all_gather (W-1) x payload; `frugalrl/fusion/sync.py`)",
        "top-k: fp16 values, int16 indices (int32 for tensors above 32,767 entries), error feedback, beta 0",
        "sync FLOPs: element operations of encode, reduction and decode (1 FLOP each), as a share of the run's "
        "total FLOPs; encode / comm / decode: seconds per worker in each part of the synchronisation",
        "steps/s: env steps of all workers per second of wall-clock",
    ]]]  # fmt: skip
    parts = ["\n".join(lines)]
    for env in dict.fromkeys(r["env"] for r in rows):
        mine = [r for r in rows if r["env"] == env]
        dense = [r for r in mine if r["variant"] == "dense"]
        by_seed = {r["seed"]: r for r in dense}
        table = []
        for variant in dict.fromkeys(r["variant"] for r in mine):
            sel = [r for r in mine if r["variant"] == variant]
            evals = [r["eval_mean"] for r in sel]
            ours, dense_by_seed = (
                {r["seed"]: r["eval_mean"] for r in sel},
                {s: r["eval_mean"] for s, r in by_seed.items()},
            )
            pairs = [(a, b) for a, b in _report.pair_up(ours, dense_by_seed) if b]
            paired = _report.paired_ratio(pairs, medians=(evals, [r["eval_mean"] for r in dense]))
            ratio = paired.text("{:.3f}") if dense and pairs else "-"
            sent, wire = median_of(sel, "bytes_sent"), median_of(sel, "wire_bytes")
            dense_wire = median_of(dense, "wire_bytes") if dense else 0.0
            sync = statistics.median(r["sync_flops"] / r["total_flops"] for r in sel) if sent else None
            table.append([
                variant, len(sel), _report.fmt_mmm(evals, "{:.1f}"), ratio,
                f"{sent:,.0f}" if sent else "-", f"{wire:,.0f}" if wire else "-",
                f"{(1 - wire / dense_wire) * 100:.1f}%" if wire and dense_wire else "-",
                f"{sync:.2%}" if sync is not None else "-",
                " / ".join(f"{median_of(sel, k):.1f}" for k in ("encode_s", "comm_s", "decode_s")) if sent else "-",
                f"{median_of(sel, 'sps'):,.0f}",
            ])  # fmt: skip
        header = ["variant", "seeds", "eval return", "return / dense (of medians / per seed)", "payload per worker",
                  "on the wire per worker", "fewer wire bytes than dense", "sync FLOPs / total",
                  "encode / comm / decode s", "steps/s (all workers)"]  # fmt: skip
        parts.append(f"**{env}**\n\n" + _report.markdown_table(header, table))
    return "\n\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1"], choices=list(CONFIGS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=50_000, help="env steps per worker")
    parser.add_argument("--topk", type=float, nargs="+", default=[0.2, 0.01])
    parser.add_argument("--eval-episodes", type=int, default=20)
    _report.add_output_args(parser, "fusion")
    args = parser.parse_args()

    def run_all(args: argparse.Namespace) -> list[dict]:
        common = _report.batch_common(steps=args.steps, eval_episodes=args.eval_episodes)
        variants = [("single", 1.0), ("dense", 1.0), *[("topk", k) for k in args.topk]]
        seeds = range(1, args.seeds + 1)
        jobs = [(env, seed, *v) for env in args.envs for seed, v in _harness.interleave(seeds, variants)]
        with tempfile.TemporaryDirectory() as tmp:
            return _harness.measure(jobs, lambda job: run(*job, args.steps, args.eval_episodes, Path(tmp)),
                                    args.results, common, line)  # fmt: skip

    _report.run_or_render("fusion", args, run_all, report)


if __name__ == "__main__":
    main()
