"""The env factory with real gymnasium, Box2D, MuJoCo and ALE environments."""

from __future__ import annotations

import numpy as np
import pytest

from frugalrl.config import EnvConfig
from frugalrl.envs import FastSyncVectorEnv, env_state_dict, load_env_state_dict, make_vec_env
from frugalrl.envs.batched_cartpole import BatchedCartPole
from frugalrl.envs.wrappers import FrameStack, NormalizeObservation, RunningMeanStd, find_wrapper
from frugalrl.errors import EnvError


def _run(env, steps, seed=0):
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    space = env.single_action_space
    for _ in range(steps):
        if hasattr(space, "n"):
            actions = rng.integers(0, space.n, size=env.num_envs)
        else:
            actions = rng.uniform(space.low, space.high, size=(env.num_envs, *space.shape)).astype(np.float32)
        obs, reward, terminated, truncated, info = env.step(actions)
        yield obs, reward, terminated, truncated, info


@pytest.mark.parametrize(
    ("env_id", "obs_shape", "dtype"),
    [
        ("CartPole-v1", (4,), np.float32),
        ("LunarLander-v3", (8,), np.float32),
        ("BipedalWalker-v3", (24,), np.float32),
        ("HalfCheetah-v5", (17,), np.float64),
        ("Hopper-v5", (11,), np.float64),
        ("ALE/Breakout-v5", (4, 84, 84), np.uint8),
    ],
)
def test_factory_builds_and_steps_every_family(env_id, obs_shape, dtype):
    env = make_vec_env(EnvConfig(id=env_id, num_envs=2))
    try:
        for obs, reward, terminated, truncated, _ in _run(env, 5):
            assert obs.shape == (2, *obs_shape)
            assert obs.dtype == dtype
            assert reward.shape == terminated.shape == truncated.shape == (2,)
    finally:
        env.close()


def test_atari_preprocessing_is_native():
    env = make_vec_env(EnvConfig(id="ALE/Breakout-v5", num_envs=2))
    assert type(env.unwrapped).__name__ == "AtariVectorEnv"
    obs, _ = env.reset(seed=1)
    assert obs.shape == (2, 4, 84, 84)
    env.close()


def test_same_step_autoreset_reports_final_obs_and_episode_returns():
    env = make_vec_env(EnvConfig(id="CartPole-v1", num_envs=3))
    returns_seen, reward_sums = [], np.zeros(3)
    for obs, reward, terminated, truncated, info in _run(env, 200):
        reward_sums += reward
        done = terminated | truncated
        if done.any():
            assert info["_final_obs"].tolist() == done.tolist()
            assert not np.allclose(info["final_obs"][done], obs[done])  # next episode already started
            assert info["episode"]["r"][done].tolist() == reward_sums[done].tolist()
            returns_seen += info["episode"]["r"][done].tolist()
            reward_sums[done] = 0
    assert returns_seen, "random CartPole ends episodes within 200 steps"


def test_reward_clipping_and_scaling_keep_episode_returns_raw():
    config = EnvConfig(id="CartPole-v1", num_envs=2, clip_reward=0.5, normalize_reward=True)
    env = make_vec_env(config, gamma=0.99)
    for _, reward, _, _, info in _run(env, 100):
        assert np.all(np.abs(reward) <= 0.5)
        if "_episode" in info:
            assert np.all(info["episode"]["r"][info["_episode"]] >= 8)  # raw CartPole returns count steps


def test_observation_normalisation_tracks_statistics_and_round_trips():
    env = make_vec_env(EnvConfig(id="HalfCheetah-v5", num_envs=2, normalize_obs=True, clip_obs=5.0))
    observations = [obs for obs, *_ in _run(env, 300)]
    assert np.all(np.abs(observations[-1]) <= 5.0)
    normalizer = find_wrapper(env, NormalizeObservation)
    assert normalizer.rms.count > 600
    state = env_state_dict(env)
    fresh = make_vec_env(EnvConfig(id="HalfCheetah-v5", num_envs=2, normalize_obs=True))
    load_env_state_dict(fresh, state)
    np.testing.assert_allclose(find_wrapper(fresh, NormalizeObservation).rms.mean, normalizer.rms.mean)
    eval_env = make_vec_env(EnvConfig(id="HalfCheetah-v5", num_envs=1, normalize_obs=True), training=False)
    assert find_wrapper(eval_env, NormalizeObservation) is None  # the exported policy normalises
    for e in (env, fresh, eval_env):
        e.close()


def test_running_mean_std_matches_numpy():
    data = np.random.default_rng(0).normal(3.0, 2.0, size=(1000, 3))
    rms = RunningMeanStd((3,), epsilon=0.0)
    for chunk in np.split(data, 10):
        rms.update(chunk)
    np.testing.assert_allclose(rms.mean, data.mean(0), rtol=1e-10)
    np.testing.assert_allclose(rms.var, data.var(0), rtol=1e-10)


def test_frame_stack_for_vector_observations():
    env = make_vec_env(EnvConfig(id="CartPole-v1", num_envs=2, frame_stack=3))
    assert find_wrapper(env, FrameStack) is not None
    obs, _ = env.reset(seed=0)
    assert obs.shape == (2, 3, 4)
    assert np.allclose(obs[:, 0], obs[:, 2])  # a fresh stack repeats the first frame
    previous = obs
    obs, *_ = env.step(np.zeros(2, dtype=np.int64))
    np.testing.assert_allclose(obs[:, :2], previous[:, 1:])
    env.close()


@pytest.mark.parametrize("batched", [False, True])
def test_snapshot_restores_the_exact_trajectory(batched):
    env = make_vec_env(EnvConfig(id="CartPole-v1", num_envs=2, batched=batched))
    env.reset(seed=5)
    base = env.unwrapped
    assert isinstance(base, BatchedCartPole if batched else FastSyncVectorEnv)
    blob = base.snapshot()
    actions = np.array([1, 0])
    first = [env.step(actions)[0] for _ in range(30)]
    base.restore(blob)
    second = [env.step(actions)[0] for _ in range(30)]
    np.testing.assert_array_equal(np.stack(first), np.stack(second))


def test_batched_cartpole_is_gymnasiums_cartpole_bit_for_bit():
    """Same seeds, same actions: observations, rewards, ends, final observations and episode
    statistics equal to the last bit, through falls and through the 500-step time limit."""
    batched = make_vec_env(EnvConfig(id="CartPole-v1", num_envs=6))
    one_by_one = make_vec_env(EnvConfig(id="CartPole-v1", num_envs=6, batched=False))
    assert isinstance(batched.unwrapped, BatchedCartPole)
    obs_a, _ = batched.reset(seed=11)
    obs_b, _ = one_by_one.reset(seed=11)
    np.testing.assert_array_equal(obs_a, obs_b)
    rng = np.random.default_rng(0)
    truncations = falls = 0
    for t in range(4000):
        # envs 0-2 balance (a simple controller reaches the time limit), envs 3-5 act at random
        balance = (obs_a[:, 2] + 0.5 * obs_a[:, 3] > 0).astype(np.int64)
        actions = np.where(np.arange(6) < 3, balance, rng.integers(0, 2, 6))
        step_a, step_b = batched.step(actions), one_by_one.step(actions)
        for got, want in zip(step_a[:4], step_b[:4], strict=True):
            np.testing.assert_array_equal(got, want, err_msg=f"step {t}")
        info_a, info_b = step_a[4], step_b[4]
        assert set(info_a) == set(info_b)
        if "final_obs" in info_a:
            np.testing.assert_array_equal(info_a["_final_obs"], info_b["_final_obs"])
            np.testing.assert_array_equal(info_a["final_obs"], info_b["final_obs"])
            np.testing.assert_array_equal(info_a["episode"]["r"], info_b["episode"]["r"])
        truncations += int(step_a[3].sum())
        falls += int(step_a[2].sum())
        obs_a = step_a[0]
    assert truncations >= 3 and falls >= 50  # both kinds of episode end were compared


def test_cartpole_with_kwargs_is_not_batched():
    env = make_vec_env(EnvConfig(id="CartPole-v1", num_envs=2, kwargs={"sutton_barto_reward": True}))
    assert isinstance(env.unwrapped, FastSyncVectorEnv)


def test_unknown_env_is_a_clear_error():
    config = EnvConfig.model_construct(id="Nope-v0", num_envs=1)
    with pytest.raises(EnvError, match="Nope-v0"):
        make_vec_env(config)
