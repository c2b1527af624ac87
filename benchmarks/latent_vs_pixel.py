"""The latent policy on one shared Atari encoder against pixel PPO, on the Atari-100k protocol.

Protocol (Kaiser et al. 2020, "Model-Based RL for Atari", and the papers that reuse its
budget): 100k agent steps per run (400k frames at frame-skip 4), sticky actions (0.25) as in
every Atari config here, and the score of a run is the mean return over its evaluation episodes:
full games (all lives; training cuts the value target at a lost life, the game goes on; no
automatic FIRE), stochastic policy. Scores are given raw and human-normalised,
``(score - random) / (human - random)``, with the reference scores below.

One encoder serves every latent run: ``frugalrl pretrain encoder --games ...`` trains it once on
random-play frames of all ``--games`` (per-game world-model heads), and its cost is listed once,
as a shared cost, beside the per-run cost of each latent run, with the number of runs at which
it has paid for itself against pixel PPO (the break-even). ``--held-out`` games are left out of
the encoder's frames: latent runs there fit their world model on the new game and measure the
head start on frames the encoder never saw, frozen and fine-tuned.

Variants per game and seed (every run is a fresh ``frugalrl train`` subprocess, MLflow off,
one torch thread, ``--workers`` at a time):

- ``pixel``     PPO with the Nature CNN on frames (``configs/atari100k-ppo.yaml``);
- ``real``      the latent policy on the frozen shared encoder, 100% real steps;
- ``stages``    the seed's three stages: 70/30 -> 30/70 virtual/real -> 100% real;
- ``adaptive``  the adaptive schedule, its target the game's human score;
- ``lora``      the three stages with LoRA on the encoder in the last, all-real stage.

Rows are kept per run in ``benchmarks/results/latent_vs_pixel.jsonl``; the table renders the
newest row of every (game, variant, seed) at the newest budget, so a long comparison can be run
in parts (``--variants pixel`` first, the latent ones with ``--encoder DIR`` later).

    python -m benchmarks.latent_vs_pixel --games ALE/Breakout-v5 ALE/Pong-v5 --held-out ALE/Boxing-v5 \
        --seeds 3 --steps 100000 --workers 2 --write
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from frugalrl.stats import interquartile_mean

from . import _harness, _report
from ._atari import ATARI100K_PROTOCOL, REFERENCES, STAGES, atari100k_runs, human_normalised

CONFIGS = _report.REPO_ROOT / "configs"
VARIANTS: dict[str, list[str]] = {
    "real": ["latent.curriculum.stages=[{virtual_fraction: 0.0, real_share: 1.0}]"],
    "stages": [f"latent.curriculum.stages={STAGES}"],
    "adaptive": [f"latent.curriculum.stages={STAGES}", "latent.curriculum.mode=adaptive"],
    "lora": [f"latent.curriculum.stages={STAGES}", "latent.encoder_adapter=lora"],
}
HELD_OUT_VARIANTS = {"real": VARIANTS["real"], "finetune": [*VARIANTS["real"], "latent.encoder_mode=finetune"]}
DESCRIPTIONS = {
    "pixel": "pixel PPO (Nature CNN)",
    "real": "latent, frozen shared encoder, 100% real",
    "stages": "latent, seed's 3 stages",
    "adaptive": "latent, adaptive schedule",
    "lora": "latent, 3 stages + encoder LoRA in the last",
    "finetune": "latent, shared encoder fine-tuned on this game",
}
QUALITY = ("wm_latent_error_k", "wm_latent_error_k_copy", "wm_reward_accuracy", "wm_done_accuracy",
           "wm_imagined_return", "wm_real_return")  # fmt: skip
RESULTS = _report.RESULTS_DIR / "latent_vs_pixel.jsonl"


def learning_curve(run_dir: Path) -> tuple[float | None, float | None]:
    """(first real training-episode score, mean score of the first 10 real training episodes)."""
    scores = [r["episode_return"] for r in _harness.metrics(run_dir)
              if r.get("episode_return") is not None and r.get("source") != "virtual"]  # fmt: skip
    return (scores[0], statistics.mean(scores[:10])) if scores else (None, None)


def pretrain_shared(args: argparse.Namespace, workdir: Path) -> Path:
    """One encoder on all ``--games`` (never the held-out ones); its row is kept like a run's."""
    out = (args.encoder_dir or workdir) / "encoder"
    sets = [f"latent.pretrain_updates={args.pretrain_updates}", f"latent.collect_steps={args.collect_steps}"]
    # CPU seconds: the time figure that survives a shared machine (runs at once stretch each other's wall-clock)
    run = _harness.cli(["pretrain", "encoder", "-c", CONFIGS / "atari100k-encoder.yaml", "-o", out,
                        "--games", *args.games], out, sets, cwd=workdir)  # fmt: skip
    keep_encoder_row(out, args, run.cpu_s)
    return out


def keep_encoder_row(out: Path, args: argparse.Namespace, cpu_s: float | None = None) -> None:
    """The shared encoder's row, from the ``summary.json`` its pretraining wrote."""
    summary = json.loads((out / "summary.json").read_text())
    probe = {k: v for k, v in summary.items() if isinstance(v, int | float) and ("_r2" in k)}
    row = {
        "protocol": ATARI100K_PROTOCOL,
        "kind": "encoder",
        "games": summary.get("games", args.games),
        "encoder_dir": str(out),
        "encoder_sha256": _report.file_sha256(out / "encoder.pt"),
        "dataset_sha256": summary["dataset_sha256"],
        "dataset_frames": summary["dataset_frames"],
        "pretrain_flops": summary["total_flops"],
        "wall_s": summary["wall_s"],
        "cpu_s": cpu_s,
        "psnr_db": summary["psnr_db"],
        "per_game": summary.get("per_game", {}),
        "probe": probe,
    }
    _harness.record(args.results, _report.stamp(args.common, **row),
                    f"shared encoder: {summary['total_flops'] / 1e12:.1f} TFLOPs, {summary['wall_s']:.0f} s, "
                    f"PSNR {summary['psnr_db']} dB")  # fmt: skip


def wait_for(path: Path, timeout_s: float = 4 * 3600) -> None:
    """An encoder another invocation (``--encoder-only``) is still making: pixel runs go on meanwhile."""
    import time

    waited = 0.0
    while not path.is_file():
        if waited > timeout_s:
            raise RuntimeError(
                f"{path} did not appear within {timeout_s / 3600:.0f} h; pretrain it with --encoder-only"
            )
        time.sleep(15)
        waited += 15


def run_one(game: str, seed: int, variant: str, encoder: Path | None, args: argparse.Namespace, workdir: Path) -> dict:
    """One ``frugalrl train`` (its own process, CPU-seconds measured); the figures of its row."""
    run_dir = Path(tempfile.mkdtemp(dir=workdir)) / variant
    common = [f"seed={seed}", f"env.id={game}", f"eval.episodes={args.eval_episodes}"]
    if variant == "pixel":
        run = _harness.train(CONFIGS / "atari100k-ppo.yaml", run_dir, [*common, f"ppo.total_timesteps={args.steps}"])
    else:
        wait_for(encoder / "encoder.pt")
        extra = HELD_OUT_VARIANTS[variant] if game in args.held_out else VARIANTS[variant]
        if variant == "finetune":
            extra = [*extra, f"latent.pretrain_updates={args.finetune_updates}"]
        if variant == "adaptive":  # more real data once the return passes 80% of the game's human score
            extra = [*extra, f"latent.curriculum.target_score={REFERENCES.get(game, (0, args.target_score))[1]}"]
        sets = [*common, f"total_real_steps={args.steps}", f"latent.encoder_from={encoder}", *extra]
        run = _harness.train(CONFIGS / "atari100k-latent.yaml", run_dir, sets)
    summary, cpu_s = run.summary, run.cpu_s
    shared = summary.get("shared_pretrain_flops", 0.0)
    first, early = learning_curve(run_dir)
    return {
        "protocol": ATARI100K_PROTOCOL,
        "kind": "run",
        "game": game,
        "held_out": game in args.held_out,
        "seed": seed,
        "variant": variant,
        "score": summary["eval_mean"],
        "episode_scores": summary["eval_returns"],
        "human_normalised": human_normalised(game, summary["eval_mean"]),
        "real_env_steps": summary["real_env_steps"],
        "real_frames": summary["real_env_steps"] * 4,  # frame-skip 4 in both configs
        "virtual_env_steps": summary["virtual_env_steps"],
        "per_run_flops": summary["total_flops"] - shared,  # learning, acting, any pretraining done in the run
        "shared_pretrain_flops": shared,
        "config_hash": summary["config_hash"],
        "train_s": summary["wall_s"] - summary["eval_s"],
        "cpu_s": summary["cpu_s"],  # the run's process before its evaluation (start-up included)
        "command_cpu_s": cpu_s,  # the whole command, evaluation included
        "first_score": first,
        "early_score": early,
        **{key: summary.get(key) for key in QUALITY},
    }


def line(row: dict) -> str:
    return (f"{row['game']:<18} seed {row['seed']}  {row['variant']:<8} score {row['score']:8.2f}  real "
            f"{row['real_env_steps']:>7,}  virtual {row['virtual_env_steps']:>8,}  TFLOPs "
            f"{row['per_run_flops'] / 1e12:7.2f}  s {row['train_s']:6.0f}")  # fmt: skip


NO_ROWS = (
    "_No full-game rows in `benchmarks/results/latent_vs_pixel.jsonl` yet. The rows there (protocol `atari100k`) "
    "were trained and evaluated on single lives (ale-py's episodic_life reset the whole game at every lost life, "
    "with an automatic FIRE), so their scores are not comparable with the published full-game references; their "
    "table stays below, archived, and earlier figures further below under the old meter._"
)


def _ratio_cells(mine: list[dict], pixel: dict[int, dict], key: str) -> str:
    """ratio of medians / median of per-seed ratios, against pixel PPO of the same seed."""
    paired = _report.pair_up({r["seed"]: r[key] for r in mine}, {s: r[key] for s, r in pixel.items()})
    return _report.paired_ratio(paired).text("{:.3f}") if paired else "-"


def break_even(shared: float, latent: float, pixel: float) -> str:
    """Runs after which shared pretraining + n latent runs cost less than n pixel runs."""
    if latent >= pixel:
        return "never (a latent run costs more)"
    return f"{shared / (pixel - latent):.1f} runs"


def encoder_tables(encoder: dict) -> str:
    """The shared encoder's RAM probe against the issue's targets, and its world-model heads on held-out frames."""
    probe = encoder.get("probe", {})
    games = sorted({k.split("_ball_r2_mlp")[0] for k in probe if k.endswith("_ball_r2_mlp") and k != "ball_r2_mlp"})
    rows = []
    for game in games:
        ball, ceiling, paddle = (probe.get(f"{game}_{k}") for k in ("ball_r2_mlp", "ball_ceiling_r2", "paddle_r2_mlp"))
        if None in (ball, ceiling, paddle):
            continue
        rows.append([game, f"{ball:.3f}", f"{ceiling:.3f}", "yes" if ball >= ceiling / 2 else "no",
                     f"{paddle:.3f}", "yes" if paddle >= 0.9 else "no"])  # fmt: skip
    out = []
    if rows:
        header = ["game", "ball R^2 (MLP probe)", "CNN ceiling", "ball >= half the ceiling", "paddle R^2",
                  "paddle >= 0.9"]  # fmt: skip
        out.append(
            "RAM probe of the shared latent (held-out frames of each game):\n\n" + _report.markdown_table(header, rows)
        )
    heads = encoder.get("per_game") or {}
    if heads:
        rows = [[game, f"{m['psnr_db']:.2f}", f"{m['latent_error_1']:.4f} / {m['latent_error_1_copy']:.4f}",
                 "-" if m.get("latent_error_10") is None
                 else f"{m['latent_error_10']:.4f} / {m['latent_error_10_copy']:.4f}",
                 f"{m['reward_accuracy']:.3f}",
                 "-" if m.get("reward_accuracy_nonzero") is None else f"{m['reward_accuracy_nonzero']:.3f}",
                 f"{m['done_accuracy']:.3f}"] for game, m in heads.items()]  # fmt: skip
        header = ["game", "PSNR dB", "1-step latent error: head / copy-last", "10-step: head / copy-last",
                  "reward accuracy", "on rewarded steps", "termination accuracy"]  # fmt: skip
        out.append("World-model heads after pretraining (held-out frames of each game):\n\n"
                   + _report.markdown_table(header, rows))  # fmt: skip
    return "\n\n".join(out)


def report(results: list[dict], args: argparse.Namespace) -> str:
    runs, encoder = atari100k_runs(results)
    if not runs:
        return NO_ROWS
    ordered = [r for r in results if r in runs or r is encoder]
    first = runs[0]
    lines = [*_report.rows_lines(ordered, RESULTS), *(f"- {line}" for line in [
        f"protocol: Atari-100k: {first['steps']:,} agent steps ({first['steps'] * 4:,} frames) per run, sticky "
        f"actions 0.25, {first['eval_episodes']} evaluation episodes per run (full games, stochastic policy); "
        "score = mean over a run's episodes",
        "human-normalised = (score - random) / (human - random), references from Kaiser et al. 2020 (table 1)",
        "median and IQM: over seeds for the score; IQM also pools every evaluation episode of the variant",
        "per-run FLOPs: learning + acting (frame encoding included) + any pretraining done inside the run; "
        "the shared encoder's pretraining is listed once below, not in each run",
        "ratios: ratio of medians / median of per-seed ratios, against pixel PPO at the same seed",
        "time: CPU seconds of the run's process up to its evaluation (all threads; they do not stretch when "
        "runs share the machine) and wall-clock training seconds (which do: see the load figures); "
        "one torch thread per run; runs of this benchmark shared the cores (the load figures above say how much)",
        "a held-out game's latent runs fit its world model inside the run on `latent.collect_steps` random-play "
        "frames (configs/atari100k-latent.yaml; a per-run cost); the fine-tuned row first trains the encoder "
        f"{first.get('finetune_updates', '?')} updates on them",
    ])]  # fmt: skip
    parts = ["\n".join(lines)]
    if encoder:
        used = sum(1 for r in runs if r["variant"] != "pixel")
        parts.append(
            f"**Shared encoder** (pretrained once on {', '.join(encoder['games'])}; random play, "
            f"{encoder['dataset_frames']:,} frames, dataset sha256 {encoder['dataset_sha256'][:12]}; used by the "
            f"{used} latent runs below): {encoder['pretrain_flops'] / 1e12:.2f} TFLOPs, {encoder['wall_s']:.0f} s "
            f"wall-clock, mean held-out PSNR {encoder['psnr_db']} dB"
        )
        parts.append(encoder_tables(encoder))
    shared = encoder["pretrain_flops"] if encoder else None
    header = ["variant", "seeds", "score median", "IQM (episodes)", "human-norm. median", "real frames",
              "virtual steps", "per-run TFLOPs", "CPU s", "FLOPs / pixel", "CPU time / pixel", "wall-clock / pixel",
              "break-even vs pixel"]  # fmt: skip
    # a game some latent run treated as held out (its pixel reference may come from another invocation)
    held_games = {r["game"] for r in runs if r["held_out"]}
    for game in dict.fromkeys(r["game"] for r in runs):
        rows = [r for r in runs if r["game"] == game]
        pixel = {r["seed"]: r for r in rows if r["variant"] == "pixel"}
        table = []
        for variant in dict.fromkeys(["pixel", *VARIANTS, *HELD_OUT_VARIANTS]):
            mine = sorted((r for r in rows if r["variant"] == variant), key=lambda r: r["seed"])
            if not mine:
                continue
            scores = [r["score"] for r in mine]
            normed = [r["human_normalised"] for r in mine if r["human_normalised"] is not None]
            flops = statistics.median(r["per_run_flops"] for r in mine)
            pixel_flops = statistics.median(r["per_run_flops"] for r in pixel.values()) if pixel else None
            table.append([
                DESCRIPTIONS[variant], len(mine), _report.fmt_mmm(scores, "{:.1f}"),
                f"{interquartile_mean([s for r in mine for s in r['episode_scores']]):.1f}",
                f"{statistics.median(normed):.3f}" if normed else "-",
                f"{statistics.median(r['real_frames'] for r in mine):,.0f}",
                f"{statistics.median(r['virtual_env_steps'] for r in mine):,.0f}",
                f"{flops / 1e12:.2f}",
                f"{statistics.median(r['cpu_s'] for r in mine):,.0f}",
                "-" if variant == "pixel" else _ratio_cells(mine, pixel, "per_run_flops"),
                "-" if variant == "pixel" else _ratio_cells(mine, pixel, "cpu_s"),
                "-" if variant == "pixel" else _ratio_cells(mine, pixel, "train_s"),
                "-" if variant == "pixel" or None in (pixel_flops, shared) else break_even(shared, flops, pixel_flops),
            ])  # fmt: skip
        title = f"**{game}**" + (" (held out: the shared encoder never saw this game)" if game in held_games else "")
        parts.append(f"{title}\n\n" + _report.markdown_table(header, table))
    quality = [r for r in runs if r["variant"] != "pixel" and r.get("wm_latent_error_k") is not None]
    if quality:
        table = []
        for game, variant in dict.fromkeys((r["game"], r["variant"]) for r in quality):
            mine = [r for r in quality if (r["game"], r["variant"]) == (game, variant)]
            med = {key: statistics.median(r[key] for r in mine) for key in QUALITY}
            table.append([
                game, DESCRIPTIONS[variant], len(mine),
                f"{med['wm_latent_error_k']:.4f} / {med['wm_latent_error_k_copy']:.4f}",
                f"{med['wm_reward_accuracy']:.3f}", f"{med['wm_done_accuracy']:.3f}",
                f"{med['wm_imagined_return']:.2f} / {med['wm_real_return']:.2f}",
            ])  # fmt: skip
        header = ["game", "variant", "seeds", "k-step latent error: model / copy-last", "reward accuracy",
                  "termination accuracy", "return over k steps: imagined / real"]  # fmt: skip
        parts.append("**World model at the end of each run** (medians over seeds; on the run's last real rollout, "
                     "k = the world model's virtual horizon)\n\n" + _report.markdown_table(header, table))  # fmt: skip
    held = [r for r in runs if r["game"] in held_games]
    if held:
        table = []
        for variant in dict.fromkeys(r["variant"] for r in held):
            mine = [r for r in held if r["variant"] == variant]
            firsts = [r["first_score"] for r in mine if r["first_score"] is not None]
            early = [r["early_score"] for r in mine if r["early_score"] is not None]
            table.append([
                mine[0]["game"], DESCRIPTIONS[variant], len(mine),
                _report.fmt_mmm(firsts, "{:.1f}") if firsts else "-",
                _report.fmt_mmm(early, "{:.1f}") if early else "-",
                _report.fmt_mmm([r["score"] for r in mine], "{:.1f}"),
            ])  # fmt: skip
        header = ["game", "run", "seeds", "first training score", "mean of first 10 training episodes",
                  "final score"]  # fmt: skip
        parts.append("**Transfer to an unseen game** (head start on frames the shared encoder never saw)\n\n"
                     + _report.markdown_table(header, table))  # fmt: skip
    return "\n\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", nargs="+", default=["ALE/Breakout-v5", "ALE/Pong-v5"])
    parser.add_argument("--held-out", nargs="*", default=[], help="games left out of the encoder's frames")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=100_000, help="agent (real env) steps per run")
    every = list(dict.fromkeys(["pixel", *VARIANTS, *HELD_OUT_VARIANTS]))
    parser.add_argument("--variants", nargs="+", default=every, choices=every,
                        help="finetune: --held-out games only; lora, stages, adaptive: --games only")  # fmt: skip
    parser.add_argument("--target-score", type=float, default=20.0,
                        help="adaptive schedule's target on a game without a human reference")  # fmt: skip
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--pretrain-updates", type=int, default=3000, help="shared encoder's updates")
    parser.add_argument("--collect-steps", type=int, default=20_000, help="random-play frames per game")
    parser.add_argument("--finetune-updates", type=int, default=500, help="encoder updates on a held-out game")
    parser.add_argument("--encoder", type=Path, help="a shared encoder made by an earlier --encoder-only run")
    parser.add_argument(
        "--record-encoder",
        action="store_true",
        help="keep the row of the --encoder directory's pretraining (from its summary.json), stop",
    )
    parser.add_argument("--encoder-only", action="store_true", help="pretrain the shared encoder, keep its row, stop")
    parser.add_argument("--encoder-dir", type=Path, help="where --encoder-only keeps the encoder (default: a temp dir)")
    parser.add_argument("--workers", type=int, default=2)
    _report.add_output_args(parser, "latent_vs_pixel")
    args = parser.parse_args()
    # runs go in their own working directory: a relative path must mean the caller's
    args.encoder, args.encoder_dir = (p.resolve() if p else None for p in (args.encoder, args.encoder_dir))
    if set(args.held_out) & set(args.games):
        parser.error("--held-out games must not be among --games (the encoder trains on --games)")
    if not args.report_only:
        args.common = _report.batch_common(
            protocol=ATARI100K_PROTOCOL,
            steps=args.steps,
            eval_episodes=args.eval_episodes,
            collect_steps=args.collect_steps,
            pretrain_updates=args.pretrain_updates,
            finetune_updates=args.finetune_updates,
            workers=args.workers,
        )
        workdir = Path(tempfile.mkdtemp(prefix="latent-vs-pixel-"))
        latent = [v for v in args.variants if v != "pixel"]
        encoder = args.encoder or (pretrain_shared(args, workdir) if latent or args.encoder_only else None)
        if args.encoder_only:
            print(f"shared encoder: {encoder} (pass it to --encoder)")
            return
        if args.record_encoder:  # an encoder made earlier: its row again, from its own summary.json
            keep_encoder_row(encoder, args)
            return
        held_variants = [v for v in ["pixel", *HELD_OUT_VARIANTS] if v in args.variants]
        # Pixel runs first (they need no encoder), then the latent ones seed by seed, so a stopped run leaves
        # whole seeds; a held-out game's pixel reference last.
        jobs = [(game, seed, variant) for seed in range(1, args.seeds + 1)
                for games, variants in ((args.games, [v for v in args.variants if v != "finetune"]),
                                        (args.held_out, held_variants))
                for game in games for variant in variants]  # fmt: skip
        jobs.sort(key=lambda job: 1 if job[2] != "pixel" else (2 if job[0] in args.held_out else 0))

    def run(args: argparse.Namespace) -> list[dict]:
        def one(job: tuple[str, int, str]) -> dict:  # rows here keep no load before (they never did)
            row = _report.stamp(args.common, **run_one(*job, encoder, args, workdir))
            return _harness.record(args.results, row, line(row))

        _harness.parallel(one, jobs, args.workers)
        return _report.read_rows(args.results)  # the table renders every kept row at the newest budget

    _report.run_or_render("latent_vs_pixel", args, run, lambda rows, _: report(rows, args), lambda rows, _: rows,
                          empty=NO_ROWS)  # fmt: skip


if __name__ == "__main__":
    main()
