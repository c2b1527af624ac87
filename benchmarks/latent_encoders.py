"""Encoder objectives compared on Breakout: PSNR (the seed's figure) against what the latent knows.

For each (objective, latent_dim) the script trains an encoder on the same random-play frame
dataset with the same number of updates, then measures on held-out data: reconstruction PSNR,
the linear and MLP probe R^2 from the latent to the ball (mean of x and y) and the paddle
(AtariARI RAM labels), next to the ceiling of a supervised Nature CNN trained on the same probe
frames, plus the world model's one- and 10-step latent error (relative to "no change") and the
pretraining FLOPs. One process, one torch thread, everything sequential.

    python -m benchmarks.latent_encoders --updates 3000 --write
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from frugalrl.config import load_config
from frugalrl.cost import CostMeter
from frugalrl.latent.dataset import collect_frames
from frugalrl.latent.pretrain import train_latent_models
from frugalrl.latent.probe import probe_latent

from . import _harness, _report

CONFIG = _report.REPO_ROOT / "configs" / "breakout-latent.yaml"


def run(args: argparse.Namespace) -> list[dict]:
    torch.set_num_threads(1)
    base = load_config(CONFIG, [f"latent.pretrain_updates={args.updates}", f"latent.collect_steps={args.frames}"])
    data = collect_frames(base)
    probe_data = collect_frames(base, steps=args.probe_frames, seed=777)
    common = _report.batch_common(frames=args.frames, updates=args.updates, probe_frames=args.probe_frames)
    ceiling = None

    def one(variant: tuple[str, int]) -> dict:  # in this process, one encoder after another
        nonlocal ceiling
        objective, dim = variant
        config = load_config(
            CONFIG,
            [
                f"latent.pretrain_updates={args.updates}",
                f"latent.collect_steps={args.frames}",
                f"latent.objective={objective}",
                f"latent.latent_dim={dim}",
            ],
        )
        started = time.perf_counter()
        models, metrics = train_latent_models(config, data, CostMeter())
        train_s = time.perf_counter() - started
        probe = probe_latent(
            models.encoder, config, data=probe_data, ceiling_steps=0 if ceiling else args.ceiling_steps
        )
        if ceiling is None:
            ceiling = {k: probe[k] for k in probe if k.startswith(("r2_cnn", "ball_ceiling", "paddle_ceiling"))}
        figures = {**metrics, **probe, **ceiling, "objective": objective, "latent_dim": dim}
        return {**figures, "config_hash": config.hash(), "train_s": round(train_s, 1)}

    def line(row: dict) -> str:
        return (f"{row['objective']:<9} d={row['latent_dim']:<3} psnr {row['psnr_db']:6.2f}  ball mlp "
                f"{row['ball_r2_mlp']:.3f} lin {row['ball_r2_linear']:.3f}  paddle {row['paddle_r2_mlp']:.3f}  "
                f"(ceiling ball {row['ball_ceiling_r2']:.3f} paddle {row['paddle_ceiling_r2']:.3f})  "
                f"{row['train_s']:.0f}s")  # fmt: skip

    return _harness.measure(args.variants, one, args.results, common, line)


def _vs_copy(row: dict, k: int) -> str:
    """k-step latent error of the world model over that of predicting "no change" ("-": too few frames)."""
    model, copy = row.get(f"latent_error_{k}"), row.get(f"latent_error_{k}_copy")
    return "-" if model is None or copy is None else f"{model / max(copy, 1e-12):.2f}"


def report(rows: list[dict], results: Path) -> str:
    table = []
    for r in rows:
        half = r["ball_r2_mlp"] >= 0.5 * r["ball_ceiling_r2"]
        table.append(
            [
                r["objective"],
                r["latent_dim"],
                f"{r['psnr_db']:.2f}",
                f"{r['ball_r2_linear']:.3f}",
                f"{r['ball_r2_mlp']:.3f}",
                f"{r['paddle_r2_mlp']:.3f}",
                _vs_copy(r, 1),
                _vs_copy(r, 10),
                f"{r['pretrain_flops'] / 1e12:.2f}",
                "yes" if r["psnr_db"] >= 30 and half and r["paddle_r2_mlp"] >= 0.9 else "no",
            ]
        )
    c = rows[0]
    lines = [*_report.rows_lines(rows, results), *(f"- {line}" for line in
        [
            f"data: {c['frames']} random-play frames for training ({c['updates']} encoder updates of 64), "
            f"{c['probe_frames']} other random-play frames for the probes (ball out of play dropped), "
            "later 20% of every game held out",
            f"supervised CNN ceiling (same probe frames): ball R^2 {c['ball_ceiling_r2']:.3f} "
            f"(x {c['r2_cnn_ball_x']:.3f}, y {c['r2_cnn_ball_y']:.3f}), paddle {c['paddle_ceiling_r2']:.3f}",
            "world-model error columns: latent MSE of the prediction divided by the MSE of predicting "
            "'no change' (below 1 = the model predicts something)",
            "acceptance: PSNR >= 30 dB, ball MLP R^2 >= half the ceiling, paddle R^2 >= 0.9",
            "pretrain TFLOPs: the encoder (and world model) pretraining as the meter counts it (`pretrain` kind)",
        ])]  # fmt: skip
    header = [
        "objective", "latent dim", "PSNR dB", "ball R^2 (linear)", "ball R^2 (MLP)", "paddle R^2 (MLP)",
        "1-step error / copy", "10-step error / copy", "pretrain TFLOPs", "acceptance",
    ]  # fmt: skip
    return "\n".join(lines) + "\n\n" + _report.markdown_table(header, table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=3000)
    parser.add_argument("--frames", type=int, default=20_000)
    parser.add_argument("--probe-frames", type=int, default=8000)
    parser.add_argument("--ceiling-steps", type=int, default=1500)
    parser.add_argument(
        "--variants",
        nargs="+",
        default=[("recon", 32), ("motion", 32), ("dynamics", 32), ("dynamics", 64)],
        type=lambda s: (s.split(":")[0], int(s.split(":")[1])),
        help="objective:latent_dim, e.g. recon:32 dynamics:64",
    )
    _report.add_output_args(parser, "latent_encoders")
    args = parser.parse_args()
    _report.run_or_render("latent_encoders", args, run, report)


if __name__ == "__main__":
    main()
