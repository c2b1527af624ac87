"""Frame datasets: collected once, stored compactly, hashed for lineage.

Layout (one ``.npz``; arrays are (N, T, ...) for N parallel games of T steps each):

- ``frames``  (N, T, H, W) uint8: the frame seen at step t, each stored once (not per stack)
- ``actions`` (N, T) int64: the action taken at t
- ``rewards`` (N, T) float32, ``terminated`` / ``truncated`` (N, T) bool: what followed it
- ``starts``  (N, T) bool: frame t begins an episode
- ``ram``     (N, T, 128) uint8: console RAM at frame t (probe labels)

A stacked observation at (n, t) is frames t-k+1..t of game n, with zeros before the episode's
first frame, as ale-py's vector env pads at reset. A transition (n, t) -> (n, t+1) exists when
the episode did not end at t.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from frugalrl.checkpoint import atomic_write_bytes
from frugalrl.config import ExperimentConfig
from frugalrl.envs.atari_frames import AtariFrameReader
from frugalrl.errors import CheckpointError
from frugalrl.policy_store import load_policy

if TYPE_CHECKING:
    from frugalrl.nets.policy import ExportedPolicy

FIELDS = ("frames", "actions", "rewards", "terminated", "truncated", "starts", "ram")


@dataclass
class FrameDataset:
    frames: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    starts: np.ndarray
    ram: np.ndarray
    meta: dict[str, Any]

    @property
    def num_games(self) -> int:
        return int(self.frames.shape[0])

    @property
    def steps_per_game(self) -> int:
        return int(self.frames.shape[1])

    def __len__(self) -> int:
        return self.num_games * self.steps_per_game

    def content_hash(self) -> str:
        """sha256 over every array's bytes and the metadata: any changed frame changes it."""
        digest = hashlib.sha256(json.dumps(self.meta, sort_keys=True).encode())
        for name in FIELDS:
            digest.update(np.ascontiguousarray(getattr(self, name)).tobytes())
        return digest.hexdigest()

    # -------------------------------------------------------------- indexing
    @cached_property
    def episode_offsets(self) -> np.ndarray:
        """(N, T) int: how many frames since the episode began (0 at a start)."""
        n, t = self.starts.shape
        offsets = np.zeros((n, t), dtype=np.int64)
        for step in range(1, t):
            offsets[:, step] = np.where(self.starts[:, step], 0, offsets[:, step - 1] + 1)
        return offsets

    def stacked(self, games: np.ndarray, steps: np.ndarray, stack: int) -> np.ndarray:
        """(B, stack, H, W) uint8 observations at (games[i], steps[i])."""
        offsets = self.episode_offsets
        out = np.zeros((len(games), stack, *self.frames.shape[2:]), dtype=np.uint8)
        for k in range(stack):  # channel k holds frame t - (stack - 1 - k)
            back = stack - 1 - k
            valid = offsets[games, steps] >= back
            src = np.maximum(steps - back, 0)
            out[valid, k] = self.frames[games[valid], src[valid]]
        return out

    def split(self, holdout_fraction: float) -> tuple[np.ndarray, np.ndarray]:
        """Games are split along time: the last ``holdout_fraction`` of every game is held out."""
        cut = int(round(self.steps_per_game * (1 - holdout_fraction)))
        return np.arange(0, cut), np.arange(cut, self.steps_per_game)

    # -------------------------------------------------------------- files
    def save(self, path: Path) -> str:
        """Write the dataset atomically; returns its content sha256."""
        import io

        meta = self.meta
        buffer = io.BytesIO()
        np.savez_compressed(buffer, meta=np.array(json.dumps(meta)), **{name: getattr(self, name) for name in FIELDS})
        atomic_write_bytes(Path(path), buffer.getvalue())
        return self.content_hash()


def load_dataset(path: str | Path) -> FrameDataset:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"frame dataset {path} not found; create it with `frugalrl pretrain encoder` first")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in FIELDS}
            meta = json.loads(str(data["meta"]))
    except (OSError, ValueError, KeyError) as exc:
        raise CheckpointError(f"frame dataset {path} is corrupt or incomplete ({exc}); collect it again") from None
    return FrameDataset(**arrays, meta=meta)


def _behaviour_policy(config: ExperimentConfig) -> ExportedPolicy | None:
    """None for 'random', or a saved pixel policy (path or models:/ URI) that acts on stacked frames."""
    behaviour = config.latent.behaviour
    if behaviour == "random":
        return None

    policy = load_policy(behaviour)
    trained_on = policy.spec.get("env", {}).get("id")
    if trained_on != config.env.id:
        raise CheckpointError(
            f"latent.behaviour {behaviour}: that policy plays {trained_on}, not {config.env.id}; "
            "pass a policy of this game or 'random'"
        )
    return policy


def collect_frames_to(config: ExperimentConfig, path: Path) -> dict[str, Any]:
    """Collect frames and save them at ``path``: the pretraining stage's collection (``pretraining.latent``)."""
    data = collect_frames(config)
    return {"sha256": data.save(Path(path)), "samples": len(data), "env_id": config.env.id, "kind": "frames"}


def collect_frames(config: ExperimentConfig, steps: int | None = None, seed: int | None = None) -> FrameDataset:
    """Play ``steps`` env steps (over ``latent.collect_envs`` games) and record everything."""
    latent = config.latent
    steps = steps or latent.collect_steps
    seed = config.seed if seed is None else seed
    n = latent.collect_envs
    per_game = max(2, -(-steps // n))
    reader = AtariFrameReader(config.env, n, seed=seed)
    policy = _behaviour_policy(config)
    rng = np.random.default_rng(seed)
    stack = config.env.atari.stack_num
    size = config.env.atari.img_size

    frames = np.zeros((n, per_game, size, size), dtype=np.uint8)
    actions = np.zeros((n, per_game), dtype=np.int64)
    rewards = np.zeros((n, per_game), dtype=np.float32)
    terminated = np.zeros((n, per_game), dtype=bool)
    truncated = np.zeros((n, per_game), dtype=bool)
    starts = np.zeros((n, per_game), dtype=bool)
    ram = np.zeros((n, per_game, 128), dtype=np.uint8)
    history = np.zeros((n, stack, size, size), dtype=np.uint8)  # the behaviour policy's stacked input

    frame = reader.reset(seed=seed)
    started = np.ones(n, dtype=bool)
    try:
        for t in range(per_game):
            frames[:, t], starts[:, t], ram[:, t] = frame, started, reader.ram()
            history[started] = 0
            history = np.concatenate([history[:, 1:], frame[:, None]], axis=1)
            if policy is None:
                action = rng.integers(0, reader.action_space.n, size=n)
            else:
                with torch.no_grad():
                    action = policy.act(torch.as_tensor(history), deterministic=False).numpy()
            frame, rewards[:, t], terminated[:, t], truncated[:, t], started = reader.step(action)
            actions[:, t] = action
    finally:
        reader.close()
    meta = {
        "env_id": config.env.id,
        "behaviour": latent.behaviour,
        "seed": seed,
        "stack": stack,
        "img_size": size,
        "frameskip": config.env.atari.frameskip,
        "num_actions": int(reader.action_space.n),
    }
    return FrameDataset(frames, actions, rewards, terminated, truncated, starts, ram, meta)
