"""Does a Breakout encoder give Pong a head start? The latent policy on it, against one on a Pong encoder and pixel PPO.

Contenders on ALE/Pong-v5, the Atari-100k protocol (100k real agent steps, sticky actions 0.25, full-game
evaluation with a stochastic policy, 10 games), 3 seeds each, every run a fresh ``frugalrl train`` (MLflow
off, one torch thread):

    from-breakout   the latent policy (``configs/atari100k-latent.yaml``, 100% real steps) on a frozen encoder
                    pretrained on random-play Breakout frames only: Pong is a game it never saw (the run fits
                    its world-model head on Pong frames, as any held-out game)
    from-pong       the same on a frozen encoder pretrained on random-play Pong frames
    pixel           PPO with the Nature CNN on frames (``configs/atari100k-ppo.yaml``)

Each encoder is pretrained once (``frugalrl pretrain encoder -c configs/atari100k-encoder.yaml --games GAME``)
and its CPU-seconds are listed beside the table, not in the runs'. What "head start" means, and the verdict
rule, were fixed before running: ``benchmarks/_head_start.py``.

Rows are kept as each run ends (``benchmarks/results/pong_head_start.jsonl``); a contender and seed already
kept is not run again (its encoder is pretrained again only when a run still needs it).

    python -m benchmarks.pong_head_start --write        # about 80 minutes on one core

or in parts, e.g. ``--contenders from-breakout from-pong`` (the encoders and the latent runs, about 45 minutes)
and then ``--contenders pixel`` (about 35 minutes).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from . import _harness, _report
from ._head_start import CONTENDERS, EARLY_STEPS, GAME, RANDOM, SEEDS, curve_figures, select, training_curve, verdict

NAME = "pong_head_start"
CONFIGS = _report.REPO_ROOT / "configs"
STEPS = 100_000
EVAL_EPISODES = 10
REAL_ONLY = "latent.curriculum.stages=[{virtual_fraction: 0.0, real_share: 1.0}]"


def pretrain(game: str, workdir: Path, results: Path, common: dict) -> Path:
    """One encoder on random-play frames of ``game``; its row is kept like a run's."""
    out = workdir / f"encoder-{game.split('/')[-1]}"
    load_before = _report.load_average()
    run = _harness.cli(["pretrain", "encoder", "-c", CONFIGS / "atari100k-encoder.yaml", "-o", out, "--games", game],
                       out, cwd=workdir)  # fmt: skip
    summary = run.summary
    _harness.record(results, _report.stamp(common, kind="encoder", games=game, cpu_s=run.cpu_s, load_before=load_before,
                                           wall_s=summary["wall_s"], psnr_db=summary["psnr_db"],
                                           encoder_sha256=_report.file_sha256(out / "encoder.pt")),
                    f"encoder on {game}: {run.cpu_s:.0f} CPU-s")  # fmt: skip
    return out / "encoder.pt"


def run_one(contender: str, seed: int, encoders: dict[str, Path], workdir: Path) -> dict:
    run_dir = Path(tempfile.mkdtemp(dir=workdir)) / contender
    common = [f"seed={seed}", f"env.id={GAME}", f"eval.episodes={EVAL_EPISODES}"]
    if CONTENDERS[contender] is None:
        run = _harness.train(CONFIGS / "atari100k-ppo.yaml", run_dir, [*common, f"ppo.total_timesteps={STEPS}"])
    else:
        encoder = encoders[CONTENDERS[contender]]
        run = _harness.train(CONFIGS / "atari100k-latent.yaml", run_dir,
                             [*common, f"total_real_steps={STEPS}", f"latent.encoder_from={encoder}",
                              "latent.encoder_mode=frozen", REAL_ONLY])  # fmt: skip
    early, reached = curve_figures(training_curve(list(run.metrics())))
    summary = run.summary
    return {"kind": "run", "contender": contender, "seed": seed, "game": GAME, "steps": STEPS,
            "score": summary["eval_mean"], "episode_scores": summary["eval_returns"], "early_score": early,
            "steps_to_random_plus_1": reached, "real_env_steps": summary["real_env_steps"],
            "config_hash": summary["config_hash"], "cpu_s": run.cpu_s}  # fmt: skip


def run(args: argparse.Namespace) -> list[dict]:
    common = _report.batch_common()
    kept = {(r["contender"], r["seed"]) for r in _report.read_rows(args.results) if r["kind"] == "run"}
    jobs = [(s, c) for s, c in _harness.interleave(range(1, args.seeds + 1), args.contenders) if (c, s) not in kept]
    with tempfile.TemporaryDirectory(prefix="pong-head-start-") as tmp:
        workdir = Path(tmp)
        needed = dict.fromkeys(CONTENDERS[c] for _, c in jobs if CONTENDERS[c] is not None)
        encoders = {game: pretrain(game, workdir, args.results, common) for game in needed}
        _harness.measure(jobs, lambda job: run_one(job[1], job[0], encoders, workdir), args.results, common,
                         lambda r: f"{r['contender']} seed {r['seed']}: early {r['early_score']}, final "
                                   f"{r['score']:.1f}")  # fmt: skip
    return select(_report.read_rows(args.results))


def render(rows: list[dict], results: Path) -> str:
    runs = sorted((r for r in rows if r["kind"] == "run"),
                  key=lambda r: (list(CONTENDERS).index(r["contender"]), r["seed"]))  # fmt: skip
    encoders = [r for r in rows if r["kind"] == "encoder"]
    measured, said = verdict(runs)
    lines = [
        "A Breakout encoder's head start on Pong (the RLVR seed's transfer claim): the latent policy on a frozen "
        "Breakout encoder against one on a Pong encoder and pixel PPO, Atari-100k protocol, full-game "
        f"evaluation ({EVAL_EPISODES} games, stochastic policy). Early score: the mean training score at the "
        f"first update at or after {EARLY_STEPS:,} real steps; random + 1: the first step at which it reaches "
        f"{RANDOM + 1:.1f}. Definitions and rule: `benchmarks/_head_start.py`, fixed before running.",
        "",
        *_report.rows_lines(rows, results),
        "",
        f"**{said}**: {measured}.",
        "",
    ]
    if encoders:
        costs = "; ".join(f"{e['games']} {e['cpu_s']:.0f} CPU-s (PSNR {e['psnr_db']:.1f} dB)" for e in encoders)
        lines += [f"Encoders, pretrained once each (not in the runs' CPU-seconds): {costs}.", ""]
    header = ["contender", "seed", "early score", "first step at random + 1", "final score (10 full games)", "CPU s"]
    body = [[r["contender"], str(r["seed"]), "-" if r["early_score"] is None else f"{r['early_score']:.1f}",
             "-" if r["steps_to_random_plus_1"] is None else f"{r['steps_to_random_plus_1']:,}",
             f"{r['score']:.1f}", f"{r['cpu_s']:.0f}"] for r in runs]  # fmt: skip
    lines.append(_report.markdown_table(header, body))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=SEEDS, help="seeds 1..N of each contender")
    parser.add_argument("--contenders", nargs="+", choices=list(CONTENDERS), default=list(CONTENDERS),
                        help="run these only (the table renders every kept row)")  # fmt: skip
    _report.add_output_args(parser, NAME)
    args = parser.parse_args()
    _report.run_or_render(NAME, args, run, render, select=select, after=["latent_vs_pixel"])


if __name__ == "__main__":
    main()
