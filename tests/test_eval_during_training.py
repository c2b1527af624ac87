"""Evaluation during training (``eval.every_steps``): the same learning with it on or off, the best policy kept
and, with ``eval.policy: best``, evaluated and registered."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from frugalrl.config import ConfigError
from frugalrl.cost import CostMeter
from frugalrl.eval_during import MEAN_KEY, EvalDuringTraining, best_logged
from frugalrl.evaluation import evaluate_policy
from frugalrl.loop import Throughput
from frugalrl.policy_store import BEST_POLICY_FILE, load_policy, load_policy_file, registered_policy_file, save_policy
from frugalrl.progress import TrainingProgress
from frugalrl.training import train

from .conftest import tiny_config

EVERY = 256  # tiny_config: 8 updates of 128 steps, 1,024 in all: evaluations at 256, 512, 768 and 1,024
TIMING = {"sps", "cpu_s"}


def _rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return load_policy_file(path)[0].state_dict()


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    """The same tiny PPO run with the evaluation during training off and on."""
    torch.set_num_threads(1)
    base = tmp_path_factory.mktemp("eval_during")
    out = {}
    for name, every in (("off", 0), ("on", EVERY)):
        config = tiny_config(eval={"episodes": 4, "every_steps": every, "during_episodes": 3})
        out[name] = (base / name, train(config, base / name, interactive=False))
    return out


def test_the_learning_curve_and_the_final_weights_are_the_same_with_it_on_or_off(runs):
    (off, _), (on, _) = runs["off"], runs["on"]
    rows_off, rows_on = _rows(off), _rows(on)
    evaluated = [row["step"] for row in rows_on if MEAN_KEY in row]
    assert evaluated == [256, 512, 768, 1024] and not any(MEAN_KEY in row for row in rows_off)
    assert all(set(row) == {MEAN_KEY, "eval/iqm"} | set(plain) for row, plain in zip(rows_on, rows_off, strict=True)
               if MEAN_KEY in row)  # fmt: skip
    training = [[{k: v for k, v in row.items() if not k.startswith("eval/") and k not in TIMING} for row in rows]
                for rows in (rows_off, rows_on)]  # fmt: skip
    assert training[0] == training[1]  # losses, returns, learning rates: row by row, exactly
    weights_off, weights_on = _weights(off / "policy.pt"), _weights(on / "policy.pt")
    assert weights_off.keys() == weights_on.keys()
    assert all(torch.equal(weights_off[key], weights_on[key]) for key in weights_off)


def test_the_best_policy_is_kept_loadable_and_in_the_summary(runs):
    (off, summary_off), (on, summary) = runs["off"], runs["on"]
    logged = {row["step"]: row[MEAN_KEY] for row in _rows(on) if MEAN_KEY in row}
    best = summary["best_eval"]
    assert best == {"step": max(logged, key=lambda step: (logged[step], -step)), "mean_return": max(logged.values())}
    assert "best_eval" not in summary_off and not (off / BEST_POLICY_FILE).exists()
    policy, config = load_policy_file(on / BEST_POLICY_FILE)  # the format of policy.pt
    replayed = evaluate_policy(policy, config.env, 3, config.eval.seed, deterministic=True)
    assert replayed.mean == best["mean_return"]  # it is the policy that scored the best mean
    assert registered_policy_file(on) == on  # eval.policy last (the default): policy.pt stays the registered one
    assert summary["eval_mean"] == summary_off["eval_mean"]  # the final evaluation: the same policy, the same figure


def test_eval_policy_best_makes_evaluate_use_best_policy(tmp_path, capsys):
    from frugalrl.cli import main
    from frugalrl.ops.steps import evaluate_step

    run = tmp_path / "run"
    short = {"total_timesteps": 256, "num_steps": 32, "batch_size": 64, "update_epochs": 1}
    config = tiny_config(ppo=short, eval={"episodes": 3, "every_steps": 128, "during_episodes": 2, "policy": "best"})
    summary = train(config, run, interactive=False)
    assert summary["best_eval"] is not None
    # best and last made to differ for certain: the best file's weights moved
    policy, saved = load_policy_file(run / BEST_POLICY_FILE)
    with torch.no_grad():
        for parameter in policy.parameters():
            parameter.add_(0.5)
    save_policy(run / BEST_POLICY_FILE, policy, saved)
    best, last = _weights(run / BEST_POLICY_FILE), _weights(run / "policy.pt")
    assert any(not torch.equal(best[key], last[key]) for key in best)

    assert registered_policy_file(run) == run / BEST_POLICY_FILE
    loaded = load_policy(str(run)).state_dict()
    assert all(torch.equal(loaded[key], best[key]) for key in best)
    expected = evaluate_policy(load_policy_file(run / BEST_POLICY_FILE)[0], config.env, 3, 77).returns
    assert evaluate_step(str(run), 3, 77)["returns"] == expected  # the pipeline's evaluate step
    capsys.readouterr()
    main(["evaluate", str(run), "--episodes", "3", "--seed", "77", "--json"])
    shown = capsys.readouterr()
    assert json.loads(shown.out)["returns"] == expected and BEST_POLICY_FILE in shown.err
    main(["evaluate", str(run / "policy.pt"), "--episodes", "3", "--seed", "77", "--json"])  # a file: that file
    assert BEST_POLICY_FILE not in capsys.readouterr().err


@pytest.mark.parametrize("deterministic", [True, False], ids=["deterministic", "sampled"])  # sampled: draws from torch
def test_an_evaluation_leaves_every_generator_and_the_training_env_as_they_were(tmp_path, deterministic):
    from frugalrl.envs.factory import make_vec_env
    from frugalrl.learners import build_learner

    config = tiny_config(eval={"every_steps": 128, "during_episodes": 2, "deterministic": deterministic})
    meter = CostMeter()
    learner = build_learner(config, make_vec_env(config.env, gamma=config.ppo.gamma), meter, torch.device("cpu"))
    learner.start(config.seed)
    evaluator = EvalDuringTraining(config, tmp_path, meter)
    evaluator.on_start(learner)
    learner.run_update()  # step 128: an evaluation is due
    torch.manual_seed(5), np.random.seed(5), random.seed(5)
    before = (torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate(), learner.next_obs.clone())
    counted = meter.by_phase()
    metrics: dict = {}
    evaluator.on_update(learner, metrics)
    learner.env.close()
    assert set(metrics) == {MEAN_KEY, "eval/iqm"} and (tmp_path / BEST_POLICY_FILE).is_file()
    assert torch.equal(torch.get_rng_state(), before[0]) and np.array_equal(np.random.get_state()[1], before[1])
    assert random.getstate() == before[2] and torch.equal(learner.next_obs, before[3])
    assert meter.eval_cpu_s > 0 and meter.seconds["eval"] > 0 and "eval_cpu_s" not in meter.state_dict()
    assert meter.by_phase() == counted  # no samples, FLOPs or phase of the run's own


def test_the_rows_cpu_seconds_and_so_the_cpu_budget_leave_the_evaluations_out():
    import time

    meter = CostMeter()
    meter.eval_cpu_s = 1000.0
    learner = type("L", (), {"global_step": 10})()
    metrics: dict = {}
    Throughput(meter).on_update(learner, metrics)
    assert metrics["cpu_s"] == pytest.approx(time.process_time() - 1000.0, abs=0.5)


def test_a_resume_continues_from_the_best_of_the_rows_it_keeps(tmp_path):
    rows = [{"update": 1, "step": 128}, {"update": 2, "step": 256, MEAN_KEY: 20.0},
            {"update": 4, "step": 512, MEAN_KEY: 35.5}, {"update": 6, "step": 768, MEAN_KEY: 35.5}]  # fmt: skip
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows) + '{"cut')
    assert best_logged(tmp_path) == {"step": 512, "mean_return": 35.5}  # a tie keeps the earlier
    assert best_logged(tmp_path / "empty") is None


def test_the_end_says_when_the_run_ended_below_its_best(tmp_path):
    evaluator = EvalDuringTraining(tiny_config(eval={"every_steps": 128}), tmp_path, CostMeter())
    assert evaluator.below_best(50.0) is None  # nothing evaluated yet
    evaluator.best = {"step": 1536, "mean_return": 200.0}
    line = evaluator.below_best(150.0)
    assert line.startswith("ended below its best:") and "at step 1,536" in line
    assert "eval.policy: best registers that one" in line and "\n" not in line
    assert evaluator.below_best(200.0) is None


def test_the_eval_keys_at_their_defaults_hash_as_left_out_and_best_needs_evaluations():
    assert tiny_config().hash() == tiny_config(eval={"episodes": 4, "every_steps": 0, "policy": "last"}).hash()
    assert tiny_config().hash() != tiny_config(eval={"episodes": 4, "every_steps": 256}).hash()
    with pytest.raises(ConfigError, match="set eval.every_steps > 0"):
        tiny_config(eval={"policy": "best"})
    with pytest.raises(ConfigError):
        tiny_config(eval={"policy": "first", "every_steps": 128})


def test_the_log_line_shows_the_loss_and_the_time_left_and_the_mlflow_run_first(capsys):
    with TrainingProgress(
        1000, log_every=1, interactive=False, header="mlflow run abc: http://mlflow/#/runs/abc"
    ) as bar:
        bar.update(500, {"episode_return": 21.5, "policy_loss": -0.0123})
        bar.update(1000, {"episode_return": 30.0, "loss": 0.5})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "mlflow run abc: http://mlflow/#/runs/abc"
    assert lines[1].startswith("step 500/1000  sps ") and "  return 21.5  policy_loss -0.0123  eta " in lines[1]
    assert lines[2].startswith("step 1000/1000  sps ") and "return 30.0  loss 0.5  eta 0.0s" in lines[2]


@pytest.mark.slow  # 3 to 10 s: the MLflow model is logged
def test_a_tracked_run_logs_best_policy_and_registers_it_and_says_where_it_is(tmp_path, capsys):
    from mlflow import MlflowClient

    from frugalrl.tracking import tracking_uri

    short = {"total_timesteps": 256, "num_steps": 32, "batch_size": 64, "update_epochs": 1}
    evaluation = {"episodes": 2, "every_steps": 128, "during_episodes": 2, "policy": "best"}
    config = tiny_config(ppo=short, tracking={"enabled": True}, eval=evaluation)
    summary = train(config, tmp_path / "run", interactive=False)
    run_id = summary["mlflow_run_id"]
    out = capsys.readouterr().out.splitlines()
    assert [line for line in out if line.startswith("mlflow run ")] == [f"mlflow run {run_id}: {tracking_uri()}"]
    artifacts = {a.path for a in MlflowClient().list_artifacts(run_id, "run")}
    assert f"run/{BEST_POLICY_FILE}" in artifacts
    history = MlflowClient().get_metric_history(run_id, MEAN_KEY)
    assert sorted(m.step for m in history) == [128, 256]
    logged = load_policy(summary["model_uri"]).state_dict()  # the MLflow model register_step registers
    best = _weights(tmp_path / "run" / BEST_POLICY_FILE)
    assert all(torch.equal(logged[key], best[key]) for key in best)


def test_a_resumed_run_keeps_the_same_evaluations_and_best_policy_as_an_uninterrupted_one(tmp_path, runs):
    from frugalrl.loop import Callback

    class StopAtFive(Callback):  # tiny_config checkpoints every 2 updates: 5 is saved on the way out
        def on_update(self, learner, metrics):
            return learner.update < 5

    config = tiny_config(eval={"episodes": 4, "every_steps": EVERY, "during_episodes": 3})
    run = tmp_path / "run"
    train(config, run, interactive=False, callbacks=[StopAtFive()])
    (run / "summary.json").unlink()  # as if killed after its last checkpoint
    resumed = train(config, run, interactive=False, resume=True)
    whole, summary = runs["on"]
    assert resumed["best_eval"] == summary["best_eval"]
    assert [row.get(MEAN_KEY) for row in _rows(run)] == [row.get(MEAN_KEY) for row in _rows(whole)]
    best, expected = _weights(run / BEST_POLICY_FILE), _weights(whole / BEST_POLICY_FILE)
    assert all(torch.equal(best[key], expected[key]) for key in expected)
