"""The world model fitted on frozen encoder latents, and the held-out figures of an encoder and its world model.

``fit_world_model`` trains only the world model, on minibatches of (x_t, a_t, r_t, done_t, x_t+1)
drawn by ``TransitionSampler`` from a frame dataset and encoded by the frozen encoder: after an
encoder pretrained with ``recon`` or ``motion`` (``frugalrl.latent.pretrain``), and when an encoder
moves to a game it never saw (``frugalrl.latent.prepare``). ``heldout_metrics`` reports, on held-out
steps: PSNR, one-step and ``eval_horizon``-step latent prediction error (next to the error of
predicting "no change"), reward-class accuracy (overall and on non-zero rewards) and termination
accuracy.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from frugalrl.config import ExperimentConfig
from frugalrl.cost import CostMeter
from frugalrl.latent.dataset import FrameDataset
from frugalrl.latent.encoder import encode, psnr_db
from frugalrl.latent.store import LatentModels
from frugalrl.latent.world_model import reward_class


class TransitionSampler:
    """Random minibatches of (x_t, a_t, r_t, done_t, x_t+1) from chosen steps of a dataset."""

    def __init__(self, data: FrameDataset, steps: np.ndarray, seed: int):
        self.data = data
        self.stack = int(data.meta["stack"])
        usable = steps[steps < data.steps_per_game - 1]  # every sample needs a following array slot
        games, times = np.meshgrid(np.arange(data.num_games), usable, indexing="ij")
        self.games, self.times = games.ravel(), times.ravel()
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return len(self.games)

    def batch(self, size: int | None = None, index: np.ndarray | None = None) -> dict[str, torch.Tensor]:
        if index is None:
            index = self.rng.integers(0, len(self.games), size=size)
        g, t = self.games[index], self.times[index]
        d = self.data
        return {
            "obs": torch.as_tensor(d.stacked(g, t, self.stack)),
            "next_obs": torch.as_tensor(d.stacked(g, t + 1, self.stack)),
            "action": torch.as_tensor(d.actions[g, t]),
            "reward": torch.as_tensor(d.rewards[g, t]),
            "done": torch.as_tensor(d.terminated[g, t] | d.truncated[g, t]),
        }


def fit_world_model(
    models: LatentModels, sampler: TransitionSampler, config: ExperimentConfig, meter: CostMeter, steps: int
) -> float:
    """Train only the world model on frozen latents; returns the last loss."""
    wm = models.world_model
    optimizer = torch.optim.Adam(wm.parameters(), lr=config.latent.world_model.learning_rate)
    size = config.latent.batch_size * 4
    loss_value = float("nan")
    for _ in range(steps):
        batch = sampler.batch(size)

        @torch.no_grad()
        def latents(b=batch) -> tuple[torch.Tensor, torch.Tensor]:
            return encode(models.encoder, b["obs"]), encode(models.encoder, b["next_obs"])

        z, z_next = meter.run_counted("encoder_infer", latents, 2 * size)
        meter.count("encoder_infer", 2 * size)

        def step(b=batch, z=z, z_next=z_next) -> torch.Tensor:
            loss, _ = wm.loss(z, b["action"], z_next, b["reward"], b["done"])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            return loss.detach()

        loss_value = float(meter.run_counted("world_model_pretrain", step, size))
        meter.count("world_model_pretrain", size)
    return loss_value


@torch.no_grad()
def heldout_metrics(models: LatentModels, data: FrameDataset, steps: np.ndarray, config: ExperimentConfig) -> dict:
    """PSNR, latent prediction error (1 and H steps) and reward / termination accuracy on ``steps``."""
    models.encoder.eval()
    sampler = TransitionSampler(data, steps, seed=0)
    n = min(len(sampler), 2048)
    index = np.random.default_rng(0).choice(len(sampler), size=n, replace=False)
    batch = sampler.batch(index=index)
    z = encode(models.encoder, batch["obs"])
    z_next = encode(models.encoder, batch["next_obs"])
    recon = torch.cat([models.decoder(z[i : i + 256]) for i in range(0, n, 256)])
    pred = models.world_model(z, batch["action"])
    keep = ~batch["done"]
    target_class = reward_class(batch["reward"])
    predicted_class = pred.reward_logits.argmax(-1)
    nonzero = target_class != 1
    out = {
        "psnr_db": round(psnr_db(recon, batch["obs"]), 2),
        "latent_error_1": float(F.mse_loss(pred.next_latent[keep], z_next[keep])) if keep.any() else None,
        "latent_error_1_copy": float(F.mse_loss(z[keep], z_next[keep])) if keep.any() else None,
        "reward_accuracy": float((predicted_class == target_class).float().mean()),
        "reward_accuracy_nonzero": float((predicted_class[nonzero] == target_class[nonzero]).float().mean())
        if nonzero.any()
        else None,
        "done_accuracy": float(((pred.done_logit > 0) == batch["done"]).float().mean()),
        "heldout_samples": n,
    }
    out.update(multistep_error(models, data, steps, config.latent.world_model.eval_horizon))
    return out


@torch.no_grad()
def multistep_error(models: LatentModels, data: FrameDataset, steps: np.ndarray, horizon: int) -> dict[str, float]:
    """Open-loop rollout of the world model with the recorded actions, against the encoded truth."""
    stack = int(data.meta["stack"])
    ended = data.terminated | data.truncated
    starts = [t for t in steps if t + horizon < data.steps_per_game]
    games, times = [], []
    for g in range(data.num_games):
        for t in starts[:: max(1, len(starts) // 64)]:
            if not ended[g, t : t + horizon].any():
                games.append(g)
                times.append(t)
    if not games:
        return {f"latent_error_{horizon}": None, f"latent_error_{horizon}_copy": None}
    g, t = np.array(games), np.array(times)
    z0 = encode(models.encoder, torch.as_tensor(data.stacked(g, t, stack)))
    target = encode(models.encoder, torch.as_tensor(data.stacked(g, t + horizon, stack)))
    z = z0
    for k in range(horizon):
        z = models.world_model(z, torch.as_tensor(data.actions[g, t + k])).next_latent
    return {
        f"latent_error_{horizon}": float(F.mse_loss(z, target)),
        f"latent_error_{horizon}_copy": float(F.mse_loss(z0, target)),
    }
