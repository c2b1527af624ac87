"""Atari scores as the field measures them: full games (all lives), sticky actions 0.25, games cut
at 108,000 frames, the policy serving for itself; a lost life cuts the learner's value target only."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from frugalrl.config import EnvConfig, load_config
from frugalrl.envs.factory import make_vec_env
from frugalrl.evaluation import EvalResult, protocol_note, random_policy_returns, scoring_protocol

from .conftest import REPO

BREAKOUT = EnvConfig(id="ALE/Breakout-v5", num_envs=2)


@pytest.mark.slow
def test_a_random_policy_scores_the_published_random_breakout_score_over_full_games():
    """Published random Breakout: 1.7 (Mnih et al. 2015; Machado et al. 2018's protocol gives about
    the same). One life of a random policy scores about a fifth of that, with automatic FIRE."""
    result = random_policy_returns(BREAKOUT, episodes=20, seed=10_000)
    assert 0.8 <= result.mean <= 3.2, result.returns
    assert min(result.lengths) > 60  # every episode is a whole game of five lives, not one life


def test_a_lost_life_ends_the_value_target_but_not_the_game():
    env = make_vec_env(BREAKOUT, training=True)
    rng = np.random.default_rng(0)
    _, info = env.reset(seed=3)
    lives, game_reward, lost_lives = info["lives"].copy(), np.zeros(2), 0
    try:
        for _ in range(5000):
            _, reward, terminated, truncated, info = env.step(rng.integers(0, 4, 2))
            game_reward += reward
            lost = info.get("life_lost", np.zeros(2, dtype=bool))
            if lost.any():
                lost_lives += int(lost.sum())
                assert terminated[lost].all()  # the learner's value target stops here
                assert (info["lives"][lost] == lives[lost] - 1).all() and (info["lives"][lost] > 0).all()
                assert not info.get("_episode", np.zeros(2, dtype=bool))[lost].any()  # the game goes on
            if "_episode" in info:  # a whole game ended: its return is every life's rewards
                ended = info["_episode"]
                assert np.allclose(info["episode"]["r"][ended], game_reward[ended])
                game_reward[ended] = 0
                if lost_lives >= 4:
                    break
            lives = info["lives"].copy()
    finally:
        env.close()
    assert lost_lives >= 4


def test_evaluation_plays_whole_games_without_the_life_loss_signal():
    env = make_vec_env(BREAKOUT, num_envs=1, training=False)
    rng = np.random.default_rng(1)
    env.reset(seed=5)
    try:
        for _ in range(3000):
            _, _, terminated, truncated, info = env.step(rng.integers(0, 4, 1))
            assert "life_lost" not in info
            if terminated[0] or truncated[0]:
                break
    finally:
        env.close()
    assert terminated[0] or truncated[0]


def test_single_life_episodes_are_refused_and_a_deviating_protocol_is_named():
    from frugalrl.errors import ConfigError

    with pytest.raises(ConfigError, match="life_loss"):
        load_config(REPO / "configs" / "breakout-ppo.yaml", ["env.atari.episodic_life=true"])
    shipped = load_config(REPO / "configs" / "breakout-ppo.yaml")
    assert scoring_protocol(shipped.env) == "full-game" and protocol_note(shipped.env, shipped.eval.episodes) is None
    capped = load_config(REPO / "configs" / "breakout-ppo.yaml", ["env.atari.max_episode_steps=10000"])
    assert "10000 frames" in scoring_protocol(capped.env)
    note = protocol_note(capped.env, 5)
    assert note.startswith("note:") and "\n" not in note and "30 full games" in note
    assert scoring_protocol(EnvConfig(id="CartPole-v1")) is None


def test_a_policy_saved_with_single_life_episodes_is_evaluated_on_full_games():
    spec = {**BREAKOUT.model_dump(mode="json"), "atari": {**BREAKOUT.atari.model_dump(), "episodic_life": True}}
    assert EnvConfig.model_validate(EnvConfig.saved(spec)).atari.episodic_life is False


def _play_registered():
    spec = importlib.util.spec_from_file_location("play_registered", REPO / "scripts" / "play_registered.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # about 30 s: a tiny Boxing policy, 8 capped games in each client
def test_a_plain_gymnasium_client_and_frugalrl_score_a_model_alike(tmp_path):
    """Boxing, so that even an untrained policy's score varies from game to game (it takes punches);
    games cut at 2,000 frames to keep the test short, in both clients."""
    from frugalrl.evaluation import evaluate_policy
    from frugalrl.policy_store import load_policy
    from frugalrl.training import train

    cap = 2000
    config = load_config(REPO / "configs" / "breakout-ppo.yaml", [
        "env.id=ALE/Boxing-v5", "ppo.total_timesteps=256", "env.num_envs=2", "ppo.num_steps=128",
        "ppo.batch_size=64", "eval.episodes=2", f"env.atari.max_episode_steps={cap}", "tracking.enabled=true",
    ])  # fmt: skip
    summary = train(config, tmp_path / "run", interactive=False)
    ours = evaluate_policy(load_policy(str(tmp_path / "run")), config.env, episodes=8, seed=10_000)
    theirs = EvalResult.from_returns(
        _play_registered().play(summary["model_uri"], "ALE/Boxing-v5", 8, 10_000, max_frames=cap), [0] * 8
    )
    assert ours.std > 0 and theirs.std > 0  # the scores vary: a real comparison of distributions
    assert ours.ci_low <= theirs.ci_high and theirs.ci_low <= ours.ci_high, (ours.returns, theirs.returns)
