"""Episode recordings: a GIF a browser can play, the evaluation's episode, one line when it cannot render."""

from __future__ import annotations

import os

import pytest
from PIL import Image

from frugalrl.cli import main
from frugalrl.config import EnvConfig, load_config
from frugalrl.evaluation import evaluate_policy
from frugalrl.ops.video import VideoUnavailable, record_episode
from frugalrl.policy_store import load_policy
from frugalrl.training import train

from .conftest import REPO, tiny_config


def _decoded(path) -> tuple[int, tuple[int, int]]:
    """(frames written, size): Pillow merges identical consecutive frames into one longer one,
    so frames are counted as the total duration over one frame's."""
    with Image.open(path) as gif:
        durations = []
        for index in range(gif.n_frames):
            gif.seek(index)
            durations.append(gif.info["duration"])
        return round(sum(durations) / min(durations)), gif.size


def test_a_recorded_cartpole_episode_is_the_evaluated_episode(tmp_path):
    train(tiny_config(ppo={"total_timesteps": 4096}), tmp_path / "run", interactive=False)
    policy = load_policy(str(tmp_path / "run"))
    recorded = record_episode(policy, EnvConfig(id="CartPole-v1"), tmp_path / "episode.gif", seed=10_000)
    evaluated = evaluate_policy(policy, EnvConfig(id="CartPole-v1"), episodes=1, seed=10_000)
    assert recorded["episode_return"] == evaluated.returns[0]
    frames, (width, height) = _decoded(tmp_path / "episode.gif")
    assert frames == recorded["frames"] == recorded["episode_steps"] + 1 and width == 320 and height > 0
    assert not list(tmp_path.glob("*.partial"))

    with pytest.raises(VideoUnavailable, match="give a path ending in .gif"):
        record_episode(policy, EnvConfig(id="CartPole-v1"), tmp_path / "episode.mp4")


def test_long_episodes_are_thinned_to_max_frames(tmp_path):
    train(tiny_config(ppo={"total_timesteps": 1024}), tmp_path / "run", interactive=False)
    policy = load_policy(str(tmp_path / "run"))
    recorded = record_episode(policy, EnvConfig(id="CartPole-v1"), tmp_path / "short.gif", max_frames=5)
    assert recorded["frames"] <= 5 and _decoded(tmp_path / "short.gif")[0] == recorded["frames"]


def test_evaluate_video_writes_the_gif_or_says_in_one_line_why_not(tmp_path, capsys):
    train(tiny_config(ppo={"total_timesteps": 1024}), tmp_path / "run", interactive=False)
    main(["evaluate", str(tmp_path / "run"), "--episodes", "2", "--video", str(tmp_path / "v.gif")])
    out = capsys.readouterr().out
    assert "video: " in out and _decoded(tmp_path / "v.gif")[0] > 1

    # MuJoCo renders through GL: a GIF where EGL or OSMesa exists, else one line and exit 2
    config = tiny_config(env={"id": "InvertedPendulum-v5", "num_envs": 2}, ppo={"total_timesteps": 256})
    train(config, tmp_path / "pendulum", interactive=False)
    try:
        main(["evaluate", str(tmp_path / "pendulum"), "--episodes", "1", "--video", str(tmp_path / "p.gif")])
    except SystemExit as exit_info:
        err = capsys.readouterr().err.strip()
        assert exit_info.code == 2 and len(err.splitlines()) == 1 and "MUJOCO_GL" in err, err
        assert not (tmp_path / "p.gif").exists()
    else:
        assert _decoded(tmp_path / "p.gif")[0] > 1


@pytest.mark.slow
def test_an_atari_policy_is_recorded_at_the_native_resolution(tmp_path):
    overrides = ["ppo.total_timesteps=256", "ppo.num_steps=32", "env.num_envs=2", "ppo.batch_size=32",
                 "eval.episodes=1",
                 "tracking.enabled=false", "env.atari.max_episode_steps=2000"]  # fmt: skip
    train(load_config(REPO / "configs" / "breakout-ppo.yaml", overrides), tmp_path / "run", interactive=False)
    policy = load_policy(str(tmp_path / "run"))
    env = EnvConfig.model_validate(policy.spec["env"])
    recorded = record_episode(policy, env, tmp_path / "breakout.gif", max_frames=50, width=1000)
    frames, size = _decoded(tmp_path / "breakout.gif")
    assert size == (160, 210) and frames == recorded["frames"] <= 50


def test_mujoco_gl_is_the_users_choice_else_the_first_backend_that_renders(monkeypatch):
    from frugalrl.ops import video

    tried = []
    monkeypatch.setattr(video, "_probe_gl", lambda backend: tried.append(backend) or backend == "osmesa")
    monkeypatch.setenv("MUJOCO_GL", "glfw")
    assert video._choose_mujoco_gl() == "glfw" and tried == []  # set by the user: never overridden
    monkeypatch.delenv("MUJOCO_GL")
    assert video._choose_mujoco_gl() == "osmesa" and tried == ["egl", "osmesa"]
    assert os.environ["MUJOCO_GL"] == "osmesa"
    monkeypatch.delenv("MUJOCO_GL")
    monkeypatch.setattr(video, "_probe_gl", lambda backend: False)
    assert video._choose_mujoco_gl() is None and "MUJOCO_GL" not in os.environ
