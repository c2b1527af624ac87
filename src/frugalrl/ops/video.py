"""Episode recordings: one deterministic episode of a policy as an animated GIF.

RL users expect to *see* a policy. A GIF needs no codec on the machine (Pillow writes it) and
plays inline in any browser, so the report can embed it. Frames come from the env's own
``rgb_array`` renderer:

- classic control and Box2D: pygame, offscreen;
- MuJoCo: its offscreen GL context. ``MUJOCO_GL`` is honoured when set; when not, EGL and then
  OSMesa are tried in a throwaway subprocess (a failed GL import can poison the process that
  tried it) and the first that renders is used. With no GL on the machine the recording fails
  with one line (``VideoUnavailable``), never a crash;
- Atari: the ALE screen at its native 160x210, while the policy sees the config's
  preprocessing of the same frames (``_AtariAgentView``: frame skip, max of the last two
  grayscale screens, resize, stack, no-op starts, FIRE after reset). Its resize is Pillow's,
  not the one inside ale-py's vector env, so a recorded episode can differ from an evaluated
  one by the odd action; the recording shows the policy playing, the evaluation is the score.

Episode ``seed`` is reset exactly as the evaluation's episode of that seed (non-Atari envs).
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from frugalrl.config import EnvConfig
from frugalrl.envs.dynamics import apply_dynamics
from frugalrl.envs.registry import ensure_registered, is_atari, split_env_id
from frugalrl.errors import FrugalError
from frugalrl.nets.policy import ExportedPolicy


class VideoUnavailable(FrugalError):
    """The env cannot render on this machine (the message says why and what to install)."""


def record_episode(
    policy: ExportedPolicy,
    env_config: EnvConfig,
    path: str | Path,
    seed: int = 10_000,
    max_frames: int = 400,
    width: int = 320,
    fps: int = 25,  # 40 ms a frame: GIF stores centiseconds, so the timing stays exact
) -> dict[str, Any]:
    """Play one deterministic episode from ``seed``, write it to ``path`` (GIF); what was recorded.

    Long episodes keep every k-th frame so at most ``max_frames`` are written; frames wider
    than ``width`` are scaled down (a CartPole episode is then a few hundred KB).
    """
    path = Path(path)
    if path.suffix.lower() != ".gif":
        raise VideoUnavailable(f"--video {path}: recordings are GIF files; give a path ending in .gif")
    env, preprocess = _render_env(env_config, width)
    policy = policy.eval()
    frames: list[np.ndarray] = []
    total, steps = 0.0, 0
    try:
        obs, _ = env.reset(seed=seed)
        frames.append(_frame(env, env_config.id))
        done = False
        while not done:
            with torch.inference_mode():
                batch = torch.as_tensor(preprocess(obs)[None])
                action = policy.act(batch, deterministic=True)[0].cpu().numpy()
            if not policy.actor_critic.discrete:
                action = np.clip(action, env.action_space.low, env.action_space.high)
            obs, reward, terminated, truncated, _ = env.step(action if action.ndim else int(action))
            total, steps, done = total + float(reward), steps + 1, terminated or truncated
            frames.append(_frame(env, env_config.id))
    finally:
        env.close()
    kept = frames[:: max(1, -(-len(frames) // max_frames))]
    _write_gif(kept, path, width, fps)
    return {"path": str(path), "episode_return": total, "episode_steps": steps, "frames": len(kept)}


def _render_env(config: EnvConfig, width: int = 320) -> tuple[Any, Any]:
    """A single env rendering ``rgb_array``, and the observation preprocessing the policy expects."""
    import gymnasium as gym

    # pygame renders offscreen here; without this SDL probes for a display and complains on stderr
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    ensure_registered(config.id, config.imports)  # the user's env modules (module:EnvId, env.imports)
    if is_atari(config.id):
        import ale_py

        gym.register_envs(ale_py)
        atari = config.atari
        env = gym.make(
            config.id, render_mode="rgb_array", frameskip=1, obs_type="grayscale",
            repeat_action_probability=atari.repeat_action_probability,
            max_num_frames_per_episode=atari.max_episode_steps, **config.kwargs,
        )  # fmt: skip
        return _AtariAgentView(env, atari), np.asarray

    size: dict[str, int] = {}
    if _is_mujoco(config.id):
        _choose_mujoco_gl()
        size = {"width": width, "height": width}  # software GL draws every pixel: no larger than the GIF
    env = gym.make(config.id, render_mode="rgb_array", **{**size, **config.kwargs})
    if config.dynamics.changed:
        env = apply_dynamics(env, config.dynamics, config.id)
    if config.frame_stack > 1:
        env = gym.wrappers.FrameStackObservation(env, config.frame_stack)
        return env, lambda obs: np.asarray(obs, dtype=np.float32).reshape(-1)
    return env, lambda obs: np.asarray(obs, dtype=np.float32)


def _is_mujoco(env_id: str) -> bool:
    import gymnasium as gym

    try:
        return "mujoco" in str(gym.spec(split_env_id(env_id)[1]).entry_point)
    except gym.error.Error:
        return False


_GL_PROBE = (
    "import sys; from importlib import import_module; "
    "GLContext = import_module('mujoco.' + sys.argv[1]).GLContext; "
    "ctx = GLContext(16, 16); ctx.make_current(); ctx.free()"
)


@functools.cache
def _probe_gl(backend: str) -> bool:
    """Whether MuJoCo can open an offscreen ``backend`` context on this machine (in a subprocess)."""
    env = {k: v for k, v in os.environ.items() if k != "PYOPENGL_PLATFORM"}
    try:
        proc = subprocess.run([sys.executable, "-c", _GL_PROBE, backend], env=env, capture_output=True, timeout=60)
    except subprocess.TimeoutExpired:
        return False
    return proc.returncode == 0


def _choose_mujoco_gl(backends: tuple[str, ...] = ("egl", "osmesa")) -> str | None:
    """Set ``MUJOCO_GL`` to the first offscreen backend that works, unless the user set it."""
    if os.environ.get("MUJOCO_GL"):
        return os.environ["MUJOCO_GL"]
    for backend in backends:
        if _probe_gl(backend):
            os.environ["MUJOCO_GL"] = backend
            return backend
    return None  # rendering then fails in _frame with the one-line reason


def _frame(env: Any, env_id: str) -> np.ndarray:
    try:
        with warnings.catch_warnings():  # glfw warns before MuJoCo fails: the error below says it all
            warnings.simplefilter("ignore")
            frame = env.render()
    except Exception as exc:  # MuJoCo without GL raises from deep inside its context code
        raise VideoUnavailable(
            f"{env_id}: the env could not render offscreen ({type(exc).__name__}: {str(exc)[:120]}); for MuJoCo "
            "install EGL or OSMesa (Debian: libegl1 or libosmesa6) and set MUJOCO_GL=egl or osmesa"
        ) from None
    if frame is None or np.asarray(frame).ndim != 3:
        raise VideoUnavailable(f"{env_id}: the env gave no rgb_array frame; it cannot be recorded")
    return np.asarray(frame, dtype=np.uint8)


def _write_gif(frames: list[np.ndarray], path: Path, width: int, fps: int) -> None:
    from PIL import Image

    images = []
    for frame in frames:
        image = Image.fromarray(frame)
        if image.width > width:
            image = image.resize((width, round(image.height * width / image.width)), Image.Resampling.BILINEAR)
        images.append(image.convert("P", palette=Image.Palette.ADAPTIVE, colors=64))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    images[0].save(tmp, format="GIF", save_all=True, append_images=images[1:], duration=round(1000 / fps), loop=0)
    tmp.replace(path)  # never a half-written file under the final name


class _AtariAgentView:
    """A frame-skip-1 ALE env seen as the agent sees it; ``render()`` is the native RGB screen."""

    def __init__(self, env: Any, atari: Any):
        self.env, self.atari = env, atari
        self.action_space = env.action_space
        self.stack: list[np.ndarray] = []

    def _screen(self, frames: list[np.ndarray]) -> np.ndarray:
        from PIL import Image

        pooled = np.maximum(frames[-1], frames[-2]) if len(frames) > 1 else frames[-1]
        size = self.atari.img_size
        return np.asarray(Image.fromarray(pooled).resize((size, size), Image.Resampling.BILINEAR), dtype=np.uint8)

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict]:
        obs, info = self.env.reset(seed=seed)
        noops = int(np.random.default_rng(seed).integers(0, self.atari.noop_max + 1))
        for _ in range(noops):  # the no-op starts of the vector env, drawn from the episode seed
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                obs, info = self.env.reset()
        self.stack = [self._screen([obs])] * self.atari.stack_num
        meanings = self.env.unwrapped.get_action_meanings()
        if self.atari.fire_reset and "FIRE" in meanings:  # only where the policy trained with FIRE after reset
            obs, _, terminated, truncated, info = self.step(meanings.index("FIRE"))
            if terminated or truncated:
                obs, info = self.env.reset()
                self.stack = [self._screen([obs])] * self.atari.stack_num
                obs = np.stack(self.stack)
            return obs, info
        return np.stack(self.stack), info

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        total, frames = 0.0, []
        terminated = truncated = False
        info: dict = {}
        for _ in range(self.atari.frameskip):
            obs, reward, terminated, truncated, info = self.env.step(action)
            total += float(reward)
            frames.append(obs)
            if terminated or truncated:
                break
        self.stack = [*self.stack[1:], self._screen(frames[-2:])]
        return np.stack(self.stack), total, terminated, truncated, info

    def render(self) -> np.ndarray:
        return self.env.render()

    def close(self) -> None:
        self.env.close()
