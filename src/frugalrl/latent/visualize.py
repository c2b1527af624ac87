"""One picture of an encoder: frames beside their reconstructions, and the latent space in 2-D.

Top rows: the newest frame of eight stacks, each beside its reconstruction with the PSNR.
Bottom: the latents of a random-play episode batch projected on their first two principal
components, coloured by reward and by time in the episode.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from frugalrl.config import ExperimentConfig
from frugalrl.latent.dataset import collect_frames
from frugalrl.latent.encoder import encode, psnr_db
from frugalrl.latent.store import LatentModels


def principal_components(latents: torch.Tensor, k: int = 2) -> np.ndarray:
    centred = latents - latents.mean(0)
    _, _, v = torch.linalg.svd(centred, full_matrices=False)
    return (centred @ v[:k].T).numpy()


@torch.no_grad()
def visualize_latent(
    models: LatentModels, config: ExperimentConfig, out: Path, steps: int = 2000, seed: int = 4242
) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = collect_frames(config, steps=steps, seed=seed)
    stack = int(data.meta["stack"])
    games, times = np.meshgrid(np.arange(data.num_games), np.arange(data.steps_per_game), indexing="ij")
    games, times = games.ravel(), times.ravel()
    frames = torch.as_tensor(data.stacked(games, times, stack))
    models.encoder.eval()
    latents = encode(models.encoder, frames)
    shown = np.linspace(0, len(frames) - 1, 8).astype(int)
    recon = models.decoder(latents[shown])

    fig = plt.figure(figsize=(16, 10))
    for column, i in enumerate(shown):
        ax = fig.add_subplot(4, 8, column + 1)
        ax.imshow(frames[i, -1].numpy(), cmap="gray", vmin=0, vmax=255)
        ax.set_title("frame", fontsize=8)
        ax.axis("off")
        ax = fig.add_subplot(4, 8, 8 + column + 1)
        ax.imshow(recon[column, -1].numpy(), cmap="gray", vmin=0, vmax=1)
        ax.set_title(f"{psnr_db(recon[column : column + 1], frames[i : i + 1]):.1f} dB", fontsize=8)
        ax.axis("off")
    points = principal_components(latents)
    rewards = data.rewards[games, times]
    offsets = data.episode_offsets[games, times]
    for position, (values, label) in enumerate([(rewards, "reward"), (offsets, "step in episode")]):
        ax = fig.add_subplot(2, 2, 3 + position)
        scatter = ax.scatter(points[:, 0], points[:, 1], c=values, s=4, cmap="viridis")
        fig.colorbar(scatter, ax=ax, label=label)
        ax.set_xlabel("PC 1")
        ax.set_ylabel("PC 2")
        ax.set_title(f"latents ({models.encoder.latent_dim}-d) coloured by {label}")
    fig.suptitle(f"{config.env.id}: encoder reconstructions and latent projection")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return out
