"""The latent curriculum against pixel PPO on Atari, at the same real-env-step budget.

For every seed the script pretrains one encoder + world model (``frugalrl pretrain encoder``,
random-play frames) and then trains, one after another:

1. ``pixel``     PPO with the Nature CNN on frames (``configs/breakout-ppo.yaml``);
2. ``real``      latent PPO on real data only (encoder frozen, no virtual steps);
3. ``mbpo``      a fixed small real share: 95% of steps virtual (MBPO's 5% real data);
4. ``stages``    the seed's three-stage schedule 70/30 -> 30/70 -> 100% real;
5. ``adaptive``  the adaptive schedule (more real data once the return passes 80% of
                 ``--target-score``).

The latent variants start from the seed's encoder (``latent.encoder_from``), and its
pretraining FLOPs and wall-clock are added to each of them: the curriculum's cost includes
its encoder. Every run is a fresh ``frugalrl train`` subprocess (MLflow off, one torch thread).

With ``--transfer`` (both games), each Pong chain also runs ``configs/pong-from-breakout.yaml``
from the same seed's Breakout encoder, frozen and fine-tuned on Pong frames, beside Pong's own
encoder (the ``stages`` row, same curriculum): the transfer table gives Pong's first training
score, real steps to ``--transfer-threshold`` and the final evaluation.

    python benchmarks/latent_vs_pixel.py --games ALE/Breakout-v5 ALE/Pong-v5 --seeds 3 --steps 50000 \
        --workers 1 --transfer --write
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import _report

PIXEL = {"ALE/Breakout-v5": "breakout-ppo.yaml", "ALE/Pong-v5": "pong-ppo.yaml"}
LATENT = {"ALE/Breakout-v5": "breakout-latent.yaml", "ALE/Pong-v5": "pong-latent.yaml"}
VARIANTS = {
    "real": ["latent.curriculum.stages=[{virtual_fraction: 0.0, real_share: 1.0}]"],
    "mbpo": ["latent.curriculum.stages=[{virtual_fraction: 0.95, real_share: 1.0}]"],
    "stages": [],
    "adaptive": ["latent.curriculum.mode=adaptive"],
}
DESCRIPTIONS = {
    "pixel": "pixel PPO (Nature CNN)",
    "real": "latent PPO, 100% real",
    "mbpo": "latent, 95% virtual (MBPO-like)",
    "stages": "latent, seed's 3 stages",
    "adaptive": "latent, adaptive schedule",
}
TRANSFER = {"from_frozen": "Breakout encoder, frozen", "from_finetune": "Breakout encoder, fine-tuned on Pong"}
_lock = threading.Lock()
RESULTS = _report.RESULTS_DIR / "latent_vs_pixel.jsonl"
_encoders: dict[int, tuple[threading.Event, list[Path]]] = {}


def _encoder_slot(seed: int) -> tuple[threading.Event, list[Path]]:
    with _lock:
        return _encoders.setdefault(seed, (threading.Event(), []))


def learning_curve(run_dir: Path, threshold: float) -> tuple[float | None, int | None]:
    """(first training-episode score, real steps when the running score first reached threshold)."""
    first, reached = None, None
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        score = record.get("episode_return")
        if score is None or record.get("source") == "virtual":
            continue
        step = record.get("real_step", record.get("step"))
        first = score if first is None else first
        if reached is None and score >= threshold:
            reached = step
    return first, reached


def _run(args: list[str], cwd: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "frugalrl.cli", *args], capture_output=True, text=True, cwd=cwd)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])} failed: {proc.stderr.strip().splitlines()[-1:]}")


def _sets(items: list[str]) -> list[str]:
    return [arg for item in ["tracking.enabled=false", "threads=1", *items] for arg in ("--set", item)]


def run_chain(game: str, seed: int, args: argparse.Namespace, results: list, workdir: Path) -> None:
    root = Path(tempfile.mkdtemp(dir=workdir))
    latent_config = _report.REPO_ROOT / "configs" / LATENT[game]
    pixel_config = _report.REPO_ROOT / "configs" / PIXEL[game]
    encoder_dir = root / "encoder"
    pretrain = [f"seed={seed}", f"latent.pretrain_updates={args.pretrain_updates}",
                f"latent.collect_steps={args.collect_steps}"]  # fmt: skip
    _run(
        ["pretrain", "encoder", "-c", str(latent_config), "-o", str(encoder_dir), "--no-probe", *_sets(pretrain)], root
    )
    encoder = json.loads((encoder_dir / "summary.json").read_text())
    if game == "ALE/Breakout-v5":
        ready, paths = _encoder_slot(seed)
        paths.append(encoder_dir)
        ready.set()

    def record(variant: str, run_dir: Path, pretrain: dict | None) -> None:
        summary = json.loads((run_dir / "summary.json").read_text())
        first, reached = learning_curve(run_dir, args.transfer_threshold)
        row = {
            "game": game,
            "seed": seed,
            "variant": variant,
            "eval_mean": summary["eval_mean"],
            "real_env_steps": summary["real_env_steps"],
            "virtual_env_steps": summary["virtual_env_steps"],
            # total: learning, acting (frame encoding included) and the encoder's pretraining, as the meter counts them
            "train_flops": summary["total_flops"],
            "pretrain_flops": summary["pretrain_flops"],
            "config_hash": summary["config_hash"],
            "train_s": summary["wall_s"] - summary["eval_s"] + (pretrain["wall_s"] if pretrain else 0.0),
            "first_score": first,
            "steps_to_threshold": reached,
        }
        row = _report.stamp(args.common, **row)
        with _lock:
            results.append(row)
            _report.append_row(args.results, row)
            print(
                f"{game:<16} seed {seed}  {variant:<8} eval {row['eval_mean']:7.2f}  real {row['real_env_steps']:>8,} "
                f"virtual {row['virtual_env_steps']:>9,}  TFLOPs {row['train_flops'] / 1e12:8.2f}  "
                f"s {row['train_s']:6.0f}",
                flush=True,
            )

    common = [f"seed={seed}", f"eval.episodes={args.eval_episodes}"]
    pixel_dir = root / "pixel"
    _run(["train", str(pixel_config), "--out", str(pixel_dir),
          *_sets([*common, f"ppo.total_timesteps={args.steps}"])], root)  # fmt: skip
    record("pixel", pixel_dir, None)
    for variant in args.variants:
        run_dir = root / variant
        extra = list(VARIANTS[variant])
        if variant == "adaptive":
            extra.append(f"latent.curriculum.target_score={args.target_score}")
        sets = _sets([*common, f"total_real_steps={args.steps}", f"latent.encoder_from={encoder_dir}", *extra])
        _run(["train", str(latent_config), "--out", str(run_dir), *sets], root)
        record(variant, run_dir, encoder)
    if args.transfer and game == "ALE/Pong-v5":
        ready, paths = _encoder_slot(seed)
        ready.wait()  # the Breakout chain of the same seed pretrains it
        breakout = json.loads((paths[0] / "summary.json").read_text())
        for variant, mode in (("from_frozen", "frozen"), ("from_finetune", "finetune")):
            run_dir = root / variant
            sets = _sets([*common, f"total_real_steps={args.steps}", f"latent.encoder_from={paths[0]}",
                          f"latent.encoder_mode={mode}"])  # fmt: skip
            _run(["train", str(_report.REPO_ROOT / "configs" / "pong-from-breakout.yaml"), "--out", str(run_dir),
                  *sets], root)  # fmt: skip
            record(variant, run_dir, breakout)


NO_ROWS = (
    "_No rows in `benchmarks/results/latent_vs_pixel.jsonl` yet. The figures this section held were measured before "
    "per-run rows were kept and under the old meter (which billed frame encoding as training and left pixel PPO's "
    "acting out); they stay below this table's place, marked as archived. Issue 20 re-measures this comparison "
    "on the Atari-100k protocol._"
)


def report(results: list[dict], args: argparse.Namespace) -> str:
    if not results:
        return NO_ROWS
    first = results[0]
    args = argparse.Namespace(**{k: first.get(k, getattr(args, k)) for k in
                                 ("steps", "eval_episodes", "collect_steps", "pretrain_updates")})  # fmt: skip
    lines = [*_report.rows_lines(results, RESULTS), *(f"- {line}" for line in
        [
            f"budget: {args.steps:,} real env steps per run; {args.eval_episodes} evaluation episodes "
            "(sticky actions, stochastic policy) per run",
            f"encoder per seed: {args.collect_steps:,} random-play frames, {args.pretrain_updates} updates "
            "(configs' objective and latent_dim)",
            "latent rows include their encoder + world-model pretraining (FLOPs and seconds); "
            "the pretraining frames are random play and are not counted as training env steps",
            "FLOPs ratio and time ratio are per seed against pixel PPO, then the median over seeds",
            "FLOPs: total (learning, acting with frame encoding, and the shared encoder's pretraining, listed in "
            "every latent run that used it)",
        ])]  # fmt: skip
    parts = ["\n".join(lines)]
    for game in dict.fromkeys(r["game"] for r in results):
        rows = [r for r in results if r["game"] == game]
        by = {(r["variant"], r["seed"]): r for r in rows}
        seeds = sorted({r["seed"] for r in rows})
        table = []
        for variant in ["pixel", *[v for v in VARIANTS if any(r["variant"] == v for r in rows)]]:
            mine = [by[(variant, s)] for s in seeds if (variant, s) in by]
            if not mine:
                continue
            flops = [
                by[(variant, s)]["train_flops"] / by[("pixel", s)]["train_flops"] for s in seeds if (variant, s) in by
            ]
            secs = [by[(variant, s)]["train_s"] / by[("pixel", s)]["train_s"] for s in seeds if (variant, s) in by]
            table.append(
                [
                    DESCRIPTIONS[variant],
                    len(mine),
                    _report.fmt_mmm([r["eval_mean"] for r in mine], "{:.1f}"),
                    _report.fmt_mmm([r["real_env_steps"] for r in mine]),
                    _report.fmt_mmm([r["virtual_env_steps"] for r in mine]),
                    f"{statistics.median(flops):.3f}",
                    f"{statistics.median(secs):.2f}",
                ]
            )
        header = ["variant", "seeds", "eval return", "real steps", "virtual steps", "FLOPs / pixel", "time / pixel"]
        parts.append(f"**{game}**\n\n" + _report.markdown_table(header, table))
    pong = [r for r in results if r["game"] == "ALE/Pong-v5"]
    transfer = [r for r in pong if r["variant"] in TRANSFER or r["variant"] == "stages"]
    if any(r["variant"] in TRANSFER for r in transfer):
        table = []
        for variant, label in [("stages", "Pong's own encoder (scratch)"), *TRANSFER.items()]:
            mine = [r for r in transfer if r["variant"] == variant]
            if not mine:
                continue
            firsts = [r["first_score"] for r in mine if r["first_score"] is not None]
            reached = [r["steps_to_threshold"] for r in mine if r["steps_to_threshold"] is not None]
            table.append([
                label, len(mine),
                _report.fmt_mmm(firsts, "{:.1f}") if firsts else "-",
                f"{len(reached)}/{len(mine)}" + (f", median {statistics.median(reached):,.0f}" if reached else ""),
                _report.fmt_mmm([r["eval_mean"] for r in mine], "{:.1f}"),
                f"{statistics.median(r['train_flops'] for r in mine) / 1e12:.1f}",
            ])  # fmt: skip
        header = ["Pong encoder", "seeds", "first training score", f"runs reaching {args.transfer_threshold:g}",
                  "eval return", "TFLOPs (encoder incl.)"]  # fmt: skip
        parts.append("**Transfer: Breakout encoder -> Pong** (same curriculum and real-step budget)\n\n"
                     + _report.markdown_table(header, table))  # fmt: skip
    return "\n\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", nargs="+", default=["ALE/Breakout-v5"], choices=list(LATENT))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=500_000, help="real env steps per run")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--target-score", type=float, default=20.0, help="adaptive schedule's target return")
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--pretrain-updates", type=int, default=3000, help="encoder updates per seed")
    parser.add_argument("--collect-steps", type=int, default=20_000, help="random-play frames per seed")
    parser.add_argument("--transfer", action="store_true", help="Pong from the Breakout encoder too")
    parser.add_argument("--transfer-threshold", type=float, default=-20.0, help="Pong training score to reach")
    parser.add_argument("--workers", type=int, default=2)
    _report.add_output_args(parser, "latent_vs_pixel")
    args = parser.parse_args()
    if args.report_only:
        results = _report.newest_batch(_report.read_rows(args.results))
    else:
        args.common = _report.batch_common(
            steps=args.steps,
            eval_episodes=args.eval_episodes,
            collect_steps=args.collect_steps,
            pretrain_updates=args.pretrain_updates,
        )
        results: list[dict] = []
        with tempfile.TemporaryDirectory() as workdir, ThreadPoolExecutor(args.workers) as pool:
            jobs = [
                pool.submit(run_chain, game, seed, args, results, Path(workdir))
                for seed in range(1, args.seeds + 1)
                for game in args.games
            ]
            for job in jobs:
                job.result()
    _report.emit("latent_vs_pixel", report(results, args), args)


if __name__ == "__main__":
    main()
