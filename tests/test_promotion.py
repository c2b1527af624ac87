"""The promotion gate: statistical support or no promotion; the evidence lands in the registry."""

from __future__ import annotations

import json

import mlflow
import numpy as np
import pytest
from mlflow import MlflowClient

from frugalrl.config import PromotionConfig
from frugalrl.ops.promotion import decide
from frugalrl.tracking import check_tracking, gate_promotion, register_model
from frugalrl.training import train

from .conftest import tiny_config

RNG = np.random.default_rng(0)
CHAMPION = list(100 + RNG.normal(0, 10, 20))
NOISY_PLUS_ONE = list(101 + RNG.normal(0, 10, 20))  # an independent draw, one point higher in expectation


@pytest.mark.parametrize("test", ["welch", "bootstrap"])
def test_clearly_better_challenger_is_promoted(test):
    better = [r + 30 for r in CHAMPION]
    decision = decide(better, CHAMPION, PromotionConfig(test=test))
    assert decision.promoted and decision.difference == pytest.approx(30.0)
    assert (decision.p_value is not None and decision.p_value < 0.05) or decision.ci_low > 0


@pytest.mark.parametrize("test", ["welch", "bootstrap"])
def test_noise_level_gain_is_not_promoted(test):
    decision = decide(NOISY_PLUS_ONE, CHAMPION, PromotionConfig(test=test))
    assert not decision.promoted
    assert (decision.p_value is not None and decision.p_value > 0.05) or decision.ci_low <= 0


def test_the_decision_names_the_test_paired_on_shared_seeds_else_welch():
    paired = decide(NOISY_PLUS_ONE, CHAMPION, PromotionConfig())
    assert paired.test == "paired" and paired.reason.startswith("paired t-test over seeds")
    unpaired = decide(NOISY_PLUS_ONE[:15], CHAMPION, PromotionConfig())  # unequal lengths: not pairable
    assert unpaired.test == "welch" and unpaired.reason.startswith("Welch t-test")
    forced = decide(NOISY_PLUS_ONE, CHAMPION, PromotionConfig(pair_seeds=False))
    assert forced.test == "welch"


def _seeded_returns(rng: np.random.Generator, trials: int, shift: float, n: int = 20) -> tuple:
    """Returns of two policies on the same n seeds: a per-seed part both share (the start state's
    difficulty, correlation 0.5) plus each policy's own noise; total SD 1, challenger mean + shift."""
    seed_part = rng.normal(0.0, np.sqrt(0.5), (trials, n))
    champion = seed_part + rng.normal(0.0, np.sqrt(0.5), (trials, n))
    challenger = seed_part + rng.normal(0.0, np.sqrt(0.5), (trials, n)) + shift
    return challenger, champion


@pytest.mark.parametrize("pair_seeds", [True, False])
def test_a_challenger_from_the_champions_distribution_is_promoted_at_most_alpha_of_the_time(pair_seeds):
    rng = np.random.default_rng(7)
    challenger, champion = _seeded_returns(rng, 2000, shift=0.0)
    config = PromotionConfig(pair_seeds=pair_seeds)
    rate = np.mean([decide(list(a), list(b), config).promoted for a, b in zip(challenger, champion, strict=True)])
    assert rate <= config.alpha + 0.01, rate  # 2000 trials: the rate's standard error is 0.005


def test_a_challenger_one_sd_better_is_promoted_in_95_percent_of_trials():
    rng = np.random.default_rng(8)
    challenger, champion = _seeded_returns(rng, 1000, shift=1.0)
    rate = np.mean([decide(list(a), list(b), PromotionConfig()).promoted for a, b in zip(challenger, champion,
                                                                                         strict=True)])  # fmt: skip
    assert rate >= 0.95, rate


def test_margin_too_few_episodes_and_first_model():
    better = [r + 30 for r in CHAMPION]
    assert not decide(better, CHAMPION, PromotionConfig(min_improvement=50.0)).promoted
    few = decide(better[:3], CHAMPION[:3], PromotionConfig(min_episodes=5))
    assert not few.promoted and "fewer than 5" in few.reason
    first = decide(CHAMPION, None, PromotionConfig())  # no random-policy returns given: nothing to beat
    assert first.promoted and first.champion_mean is None
    constant = decide([200.0] * 10, [100.0] * 10, PromotionConfig())  # no spread: exact comparison
    assert constant.promoted and constant.p_value == 0.0


def _logged_run(tmp_path) -> tuple[str, str]:
    """A tiny tracked training run: its MLflow run id and model URI."""
    mlflow.set_tracking_uri(check_tracking())
    summary = train(tiny_config(tracking={"enabled": True}), tmp_path / "run", interactive=False)
    return summary["mlflow_run_id"], summary["model_uri"]


def test_gate_records_decision_in_registry(tmp_path):
    (run_id, uri), name = _logged_run(tmp_path), "gate-policy"
    client = MlflowClient()
    v1 = register_model(uri, name, run_id, 100.0, "eval_mean")
    assert gate_promotion(name, v1, run_id, CHAMPION, 10_000, PromotionConfig())["promoted"]
    v2 = register_model(uri, name, run_id, 101.0, "eval_mean")
    kept = gate_promotion(name, v2, run_id, NOISY_PLUS_ONE, 10_000, PromotionConfig())
    assert not kept["promoted"] and kept["champion_version"] == v1
    assert "paired t-test" in client.get_model_version(name, v2).tags["frugalrl.promotion"]  # same seeds
    assert str(client.get_model_version_by_alias(name, "champion").version) == v1
    assert str(client.get_model_version_by_alias(name, "challenger").version) == v2
    v3 = register_model(uri, name, run_id, 130.0, "eval_mean")
    other_seeds = gate_promotion(name, v3, run_id, [r + 30 for r in CHAMPION], 123, PromotionConfig())
    assert not other_seeds["promoted"] and "other seeds" in other_seeds["reason"]
    v4 = register_model(uri, name, run_id, 130.0, "eval_mean")
    assert gate_promotion(name, v4, run_id, [r + 30 for r in CHAMPION], 10_000, PromotionConfig())["promoted"]
    assert str(client.get_model_version_by_alias(name, "champion").version) == v4
    assert "promotion_p_value" in client.get_run(run_id).data.metrics


def test_a_first_version_must_beat_the_random_policy_on_the_same_seeds():
    random = list(1.0 + RNG.normal(0, 0.8, 10).clip(-1.0))  # Breakout-like: a point or two per episode
    idle = decide([0.0] * 10, None, PromotionConfig(), random_returns=random)
    assert not idle.promoted and idle.against == "random policy"
    assert idle.reason.startswith("first model does not beat the random policy (mean")
    good = decide([r + 5 for r in random], None, PromotionConfig(test="bootstrap"), random_returns=random)
    assert good.promoted and good.reason.startswith("first model beats the random policy")


def test_random_policy_returns_repeat_and_sit_below_a_trained_policy():
    from frugalrl.config import EnvConfig
    from frugalrl.evaluation import random_policy_returns

    env = EnvConfig(id="CartPole-v1")
    first, again = random_policy_returns(env, 6, 10_000), random_policy_returns(env, 6, 10_000)
    assert first.returns == again.returns and 8 <= np.mean(first.returns) <= 40  # CartPole's random floor ~22


def test_gate_keeps_a_first_version_that_does_nothing_out_of_champion(tmp_path):
    (run_id, uri), name = _logged_run(tmp_path), "idle-policy"
    client = MlflowClient()
    v1 = register_model(uri, name, run_id, 0.0, "eval_mean")
    called = []

    def random_returns() -> list[float]:
        called.append(1)
        return [1.0, 2.0, 0.0, 1.0, 3.0, 1.0, 2.0, 0.0, 1.0, 2.0]

    result = gate_promotion(name, v1, run_id, [0.0] * 10, 10_000, PromotionConfig(), random_returns)
    assert not result["promoted"] and result["champion_version"] is None and result["random_score"] == 1.3
    assert "does not beat the random policy" in client.get_model_version(name, v1).tags["frugalrl.promotion"]
    with pytest.raises(Exception, match="champion"):
        client.get_model_version_by_alias(name, "champion")
    from frugalrl.pipelines.local import _champion_line

    from frugalrl.ops.steps import registration_markdown

    # the report and the console say plainly that nothing was learned yet, and why
    assert "demonstrates the machinery" in registration_markdown(
        {**result, "model_uri": uri, "model_name": name, "version": v1}
    )
    line = _champion_line(client, name)
    assert line.startswith(f"no champion for {name}: version {v1} kept as challenger") and "machinery" in line
    v2 = register_model(uri, name, run_id, 9.0, "eval_mean")
    assert gate_promotion(name, v2, run_id, [9.0] * 10, 10_000, PromotionConfig(), random_returns)["promoted"]
    assert str(client.get_model_version_by_alias(name, "champion").version) == v2
    v3 = register_model(uri, name, run_id, 20.0, "eval_mean")
    gate_promotion(name, v3, run_id, [20.0] * 10, 10_000, PromotionConfig(), random_returns)
    assert len(called) == 2  # with a champion in place, the random policy is not played


def test_an_encoder_or_evaluator_below_its_floor_never_becomes_champion(tmp_path):
    """Pretrained models have their own gate: a throwaway encoder must not take ``champion``."""
    from frugalrl.tracking.registry import promote_if_better

    (run_id, uri), name = _logged_run(tmp_path), "floor-encoder"
    client = MlflowClient()
    v1 = register_model(uri, name, run_id, 7.8, "psnr_db")
    decided = promote_if_better(name, v1, 7.8, {"psnr_db": (7.8, 15.0), "ball_r2_mlp": (0.3, 0.0)})
    assert not decided["promoted"] and decided["champion_version"] is None
    assert "psnr_db 7.8 < 15" in decided["reason"] and "ball_r2" not in decided["reason"]
    assert "below the champion floor" in client.get_model_version(name, v1).tags["frugalrl.promotion"]
    with pytest.raises(Exception, match="champion"):
        client.get_model_version_by_alias(name, "champion")
    v2 = register_model(uri, name, run_id, 21.0, "psnr_db")
    assert promote_if_better(name, v2, 21.0, {"psnr_db": (21.0, 15.0), "ball_r2_mlp": (0.4, 0.0)})["promoted"]
    v3 = register_model(uri, name, run_id, 30.0, "psnr_db")  # a better score does not excuse a floor it misses
    assert not promote_if_better(name, v3, 30.0, {"psnr_db": (30.0, 15.0), "ball_r2_mlp": (-0.2, 0.0)})["promoted"]
    assert str(client.get_model_version_by_alias(name, "champion").version) == v2


def test_a_run_pins_the_registry_version_its_alias_named(tmp_path):
    """Aliases move; what a run used must not: ``models:/NAME@ALIAS`` inputs become ``models:/NAME/VERSION``."""
    from frugalrl.config import validate_config
    from frugalrl.errors import TrackingError
    from frugalrl.tracking.provenance import pin_model_uri, pin_pretrained

    (run_id, uri), name = _logged_run(tmp_path), "pin-evaluator"
    client = MlflowClient()
    v1 = register_model(uri, name, run_id, 0.5, "heldout_spearman")
    client.set_registered_model_alias(name, "champion", v1)
    config = validate_config(
        {"selection": {"kind": "pivot", "settings": {"evaluator_from": f"models:/{name}@champion"}}}
    )
    pinned, notes = pin_pretrained(config)
    assert pinned.pivot.evaluator_from == f"models:/{name}/{v1}" and notes == [
        f"evaluator models:/{name}@champion is models:/{name}/{v1}: pinned for this run"
    ]
    v2 = register_model(uri, name, run_id, 0.9, "heldout_spearman")
    client.set_registered_model_alias(name, "champion", v2)  # the alias moves on; the pinned run does not
    assert pinned.pivot.evaluator_from == f"models:/{name}/{v1}"
    assert pin_model_uri(f"models:/{name}@champion") == f"models:/{name}/{v2}"
    assert pin_model_uri(f"models:/{name}/{v1}") == f"models:/{name}/{v1}" and pin_model_uri("runs/x") == "runs/x"
    with pytest.raises(TrackingError, match="cannot resolve"):
        pin_model_uri(f"models:/{name}@no-such-alias")
    # a pipeline artifact directory (gone after its stage on a cluster) is named by the version it registered
    artifact = tmp_path / "evaluator"
    artifact.mkdir()
    (artifact / "summary.json").write_text(json.dumps({"registered_model": name, "registered_version": v1}))
    assert pin_model_uri(str(artifact)) == f"models:/{name}/{v1}"
    (artifact / "summary.json").write_text("{}")  # never registered (tracking off): the path is all there is
    assert pin_model_uri(str(artifact)) == str(artifact)
