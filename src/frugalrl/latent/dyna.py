"""Dyna for the latent curriculum: the world model refitted on the newest real transitions during the run.

``WorldModelRefresher`` keeps the real learner's latest rollouts (latent, action, reward, done, next
latent), refits the world model on them every ``world_model.refresh_every_updates`` real updates
and hands the virtual env fresh start latents (``frugalrl.latent.train.LatentCurriculum``).
"""

from __future__ import annotations

import torch

from frugalrl.algos.ppo import PPO
from frugalrl.config import ExperimentConfig
from frugalrl.cost import CostMeter
from frugalrl.latent.store import LatentModels


class WorldModelRefresher:
    """Dyna: refit the world model on the newest real transitions, hand out fresh start latents.

    With ``world_model.rollout_steps`` k > 1 the refit also unrolls the model open-loop for k steps
    from each sampled latent with the recorded actions and adds the error of every imagined latent
    (until the episode's end): a one-step loss never sees the errors that compound in a virtual
    episode of ``horizon`` steps.
    """

    def __init__(self, models: LatentModels, config: ExperimentConfig, meter: CostMeter, capacity: int = 50_000):
        self.wm = models.world_model
        self.cfg = config.latent.world_model
        self.meter = meter
        self.capacity = capacity
        self.optimizer = torch.optim.Adam(self.wm.parameters(), lr=self.cfg.learning_rate)
        self.buffer: dict[str, torch.Tensor] = {}
        self.batch_size = config.latent.batch_size * 4
        self.generator = torch.Generator().manual_seed(config.seed)
        self.num_envs = 1
        self.rollouts = 0

    def add(self, agent: PPO) -> None:
        """Transitions of the real learner's last rollout (latent, action, reward, done, next latent),
        time-major, each with the env it came from (``seq``) and its step in the rollout (``t``)."""
        obs, actions, rewards, dones = agent.obs[:-1], agent.actions[:-1], agent.rewards[:-1], agent.dones[:-1]
        steps, self.num_envs = obs.shape[0], obs.shape[1]
        new = {
            "z": obs.reshape(-1, obs.shape[-1]),
            "a": actions.reshape(-1),
            "r": rewards.reshape(-1),
            "d": dones.reshape(-1),
            "z1": agent.obs[1:].reshape(-1, obs.shape[-1]),
            "seq": (self.rollouts * self.num_envs + torch.arange(self.num_envs)).repeat(steps),
            "t": torch.arange(steps).repeat_interleave(self.num_envs),
        }
        self.rollouts += 1
        for key, value in new.items():
            self.buffer[key] = torch.cat([self.buffer[key], value])[-self.capacity :] if key in self.buffer else value

    def _starts(self, k: int) -> torch.Tensor:
        """Buffer indices whose next k - 1 transitions of the same env are in the buffer too."""
        seq, t, stride = self.buffer["seq"], self.buffer["t"], self.num_envs * (k - 1)
        n = len(seq) - stride
        if n <= 0:
            return torch.empty(0, dtype=torch.long)
        ok = (seq[stride:] == seq[:n]) & (t[stride:] == t[:n] + (k - 1))
        return torch.nonzero(ok).squeeze(-1)

    def _open_loop(self, idx: torch.Tensor, first: torch.Tensor, k: int) -> torch.Tensor:
        """Mean latent error of steps 2..k unrolled from step 1's prediction ``first`` (alive steps only)."""
        b, errors = self.buffer, []
        latent, alive = first, ~b["d"][idx].bool()
        for j in range(1, k):
            at = idx + j * self.num_envs
            alive = alive & ~b["d"][at].bool()
            latent = self.wm(latent, b["a"][at]).next_latent
            if alive.any():
                errors.append(self.wm.latent_error(latent[alive], b["z1"][at][alive]))
        return torch.stack(errors).mean() if errors else first.new_zeros(())

    def refit(self) -> float:
        wm, n, k = self.wm, len(self.buffer["z"]), self.cfg.rollout_steps
        starts = self._starts(k) if k > 1 else None
        if starts is not None and len(starts) == 0:
            k, starts = 1, None  # too little replay for k steps yet: one-step loss this time
        loss_value = float("nan")
        for _ in range(self.cfg.refresh_steps):
            if starts is None:
                idx = torch.randint(0, n, (self.batch_size,), generator=self.generator)
            else:
                idx = starts[torch.randint(0, len(starts), (self.batch_size,), generator=self.generator)]
            b = {key: self.buffer[key][idx] for key in ("z", "a", "r", "d", "z1")}

            def step(b=b, idx=idx) -> torch.Tensor:
                loss, pred = wm.loss(b["z"], b["a"], b["z1"], b["r"], b["d"])
                if k > 1:
                    loss = loss + self._open_loop(idx, pred.next_latent, k)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                self.optimizer.step()
                return loss.detach()

            loss_value = float(self.meter.run_counted("world_model_train", step, self.batch_size))
            self.meter.count("world_model_train", self.batch_size)
        return loss_value

    def start_latents(self) -> torch.Tensor:
        return self.buffer["z"]
