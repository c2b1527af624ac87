"""Transitions of N parallel envs in preallocated numpy arrays, frames stored once.

Layout: a ring of ``slots`` time steps, each holding one transition per env, so a stored
transition has the flat index ``slot * N + env``. For stacked frames (``frame_stack > 1``) only
the newest frame of each observation is kept; a stack is rebuilt from the frames of earlier
slots of the same env, with zeros before the episode's first frame (as ale-py pads at reset).
Nothing is a Python object per transition: the only per-event objects are the final
observations of truncated episodes, which value bootstrapping needs.

Capacity is in transitions and, optionally, in bytes (``max_bytes``): the ring gets as many
slots as both allow, with room reserved for the newest next observations and for the final
observations of truncated episodes (one per env per 1000 steps; time limits are rarer).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass
class Transitions:
    """A batch drawn from the storage (numpy arrays; the learner moves them to its device)."""

    indices: np.ndarray  # (B,) flat indices slot * N + env
    obs: np.ndarray  # (B, *obs_shape)
    actions: np.ndarray  # (B, *action_shape)
    rewards: np.ndarray  # (B,)
    next_obs: np.ndarray  # (B, *obs_shape)
    terminated: np.ndarray  # (B,) 1.0 where the episode really ended (no bootstrap)
    weights: np.ndarray  # (B,) importance-sampling weights (1 for uniform sampling)


class TransitionStorage:
    def __init__(
        self,
        obs_shape: tuple[int, ...],
        obs_dtype: np.dtype,
        action_shape: tuple[int, ...],
        action_dtype: np.dtype,
        num_envs: int,
        capacity: int,
        max_bytes: int | None = None,
        frame_stack: int = 1,
    ):
        self.obs_shape = tuple(obs_shape)
        self.stack = frame_stack
        self.num_envs = num_envs
        frame_shape = self.obs_shape[1:] if frame_stack > 1 else self.obs_shape
        if frame_stack > 1 and self.obs_shape[0] != frame_stack:
            raise ValueError(f"observations {self.obs_shape} are not stacks of {frame_stack} frames")
        per_step = num_envs * (
            math.prod(frame_shape) * np.dtype(obs_dtype).itemsize
            + max(1, math.prod(action_shape)) * np.dtype(action_dtype).itemsize
            + 4  # reward float32
            + 3  # terminated, ended, first flags
        )
        slots = max(2, capacity // num_envs)
        if max_bytes is not None:
            # Full observations outside the ring: the newest next observations, and room for the
            # final observations of truncated episodes (budgeted at one per env per 1000 steps).
            obs_bytes = math.prod(self.obs_shape) * np.dtype(obs_dtype).itemsize
            per_step += num_envs * obs_bytes / 1000
            slots = min(slots, int((max_bytes - num_envs * obs_bytes) // per_step))
            if slots < 2:
                raise ValueError(f"replay max_bytes {max_bytes} holds fewer than 2 steps of {num_envs} envs")
        self.slots = int(slots)
        self.frames = np.zeros((self.slots, num_envs, *frame_shape), dtype=obs_dtype)
        self.actions = np.zeros((self.slots, num_envs, *action_shape), dtype=action_dtype)
        self.rewards = np.zeros((self.slots, num_envs), dtype=np.float32)
        self.terminated = np.zeros((self.slots, num_envs), dtype=bool)
        self.ended = np.zeros((self.slots, num_envs), dtype=bool)
        self.first = np.zeros((self.slots, num_envs), dtype=bool)
        self.final_obs: dict[int, np.ndarray] = {}  # flat index -> final observation (truncations only)
        self.latest_next: np.ndarray | None = None  # next observation of the newest slot
        self.cursor = 0
        self.size = 0
        self._next_first = np.ones(num_envs, dtype=bool)

    @property
    def capacity(self) -> int:
        """Transitions the ring holds when full."""
        return self.slots * self.num_envs

    @property
    def nbytes(self) -> int:
        arrays = (self.frames, self.actions, self.rewards, self.terminated, self.ended, self.first)
        finals = sum(obs.nbytes for obs in self.final_obs.values())
        latest = self.latest_next.nbytes if self.latest_next is not None else 0
        return sum(a.nbytes for a in arrays) + finals + latest

    def __len__(self) -> int:
        return self.size * self.num_envs

    # -------------------------------------------------------------- writing
    def add(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        next_obs: np.ndarray,
        final_obs: np.ndarray | None = None,
    ) -> int:
        """Store one step of every env; returns the slot written.

        ``next_obs`` is what the env returned (after an episode end: the first observation of
        the next episode); ``final_obs`` holds, for ended envs, the observation the episode
        ended on (same-step autoreset), needed to bootstrap truncated episodes.
        """
        slot = self.cursor
        n = self.num_envs
        for env in range(n):  # the slot's old truncation records go with it
            self.final_obs.pop(slot * n + env, None)
        self.frames[slot] = obs[:, -1] if self.stack > 1 else obs
        self.actions[slot] = actions.reshape(self.actions.shape[1:])
        self.rewards[slot] = rewards
        self.terminated[slot] = terminated
        ended = np.asarray(terminated) | np.asarray(truncated)
        self.ended[slot] = ended
        self.first[slot] = self._next_first
        cut = ended & ~np.asarray(terminated)
        if cut.any():
            if final_obs is None:
                raise ValueError("truncated episodes need final_obs to bootstrap from")
            for env in np.flatnonzero(cut):
                self.final_obs[slot * n + int(env)] = np.array(final_obs[env], copy=True)
        self._next_first = ended.copy()
        self.latest_next = np.array(next_obs, copy=True)
        self.cursor = (slot + 1) % self.slots
        self.size = min(self.size + 1, self.slots)
        return slot

    # -------------------------------------------------------------- which slots can be sampled
    def oldest_slot(self) -> int:
        return self.cursor if self.size == self.slots else 0

    def stale_slots(self) -> np.ndarray:
        """Slots whose frame stack reaches into overwritten slots: not sampleable (full ring only)."""
        if self.size < self.slots or self.stack == 1:
            return np.zeros(0, dtype=np.int64)
        return (self.cursor + np.arange(self.stack - 1)) % self.slots

    # -------------------------------------------------------------- reading
    def observations(self, slots: np.ndarray, envs: np.ndarray) -> np.ndarray:
        """(B, *obs_shape) observations at (slot, env)."""
        if self.stack == 1:
            return self.frames[slots, envs]
        out = np.zeros((len(slots), *self.obs_shape), dtype=self.frames.dtype)
        alive = np.ones(len(slots), dtype=bool)  # no episode start between here and slot
        out[:, -1] = self.frames[slots, envs]
        for back in range(1, self.stack):
            alive &= ~self.first[(slots - back + 1) % self.slots, envs]
            src = (slots - back) % self.slots
            out[alive, -1 - back] = self.frames[src[alive], envs[alive]]
        return out

    def next_observations(self, slots: np.ndarray, envs: np.ndarray) -> np.ndarray:
        newest = (self.cursor - 1) % self.slots
        following = (slots + 1) % self.slots
        out = self.observations(following, envs)
        is_newest = slots == newest
        if is_newest.any():
            out[is_newest] = self.latest_next[envs[is_newest]]
        ended = self.ended[slots, envs]
        for i in np.flatnonzero(ended):  # a terminal's next obs is never used; truncations bootstrap
            flat = int(slots[i]) * self.num_envs + int(envs[i])
            out[i] = self.final_obs.get(flat, 0)
        return out

    def gather(self, flat: np.ndarray, weights: np.ndarray | None = None) -> Transitions:
        slots, envs = np.divmod(flat, self.num_envs)
        return Transitions(
            indices=flat,
            obs=self.observations(slots, envs),
            actions=self.actions[slots, envs],
            rewards=self.rewards[slots, envs],
            next_obs=self.next_observations(slots, envs),
            terminated=self.terminated[slots, envs].astype(np.float32),
            weights=np.ones(len(flat), dtype=np.float32) if weights is None else weights.astype(np.float32),
        )
