"""The run loop and its callbacks, the Learner protocol, and the run-directory module boundaries."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
import torch

from frugalrl.algos.base import Learner, LearnerBase
from frugalrl.checkpoint import load_checkpoint
from frugalrl.cost import CostMeter
from frugalrl.loop import Callback, Checkpointer, MetricsLog, OnUpdate, Throughput, run_loop

from .conftest import REPO, tiny_config


class FakeLearner(LearnerBase):
    """The smallest learner: each update adds one 'episode return' and ``rollout_size`` steps."""

    def __init__(self, num_updates: int = 5, rollout_size: int = 4):
        self.config = tiny_config()
        self.env = None
        self.policy = torch.nn.Linear(1, 1)
        self.meter = CostMeter()
        self.update = 0
        self.num_updates = num_updates
        self.rollout_size = rollout_size
        self.global_step = 0
        self.next_obs = None
        self.started_with: int | None = None

    def start(self, seed: int) -> None:
        self.started_with = seed
        self.next_obs = torch.zeros(2, 1)

    def run_update(self) -> dict[str, float]:
        self.update += 1
        self.global_step += self.rollout_size
        return {"episode_return": float(self.update)}

    def state_dict(self) -> dict[str, Any]:
        return {"format": "fake", "update": self.update, "global_step": self.global_step}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.update, self.global_step = state["update"], state["global_step"]


class Recorder(Callback):
    def __init__(self, name: str, calls: list[tuple], stop_at: int | None = None):
        self.name, self.calls, self.stop_at = name, calls, stop_at

    def on_start(self, learner: Learner) -> None:
        self.calls.append((self.name, "start"))

    def on_update(self, learner: Learner, metrics: dict[str, Any]) -> bool | None:
        self.calls.append((self.name, learner.update, dict(metrics)))
        return False if learner.update == self.stop_at else None

    def on_end(self, learner: Learner) -> None:
        self.calls.append((self.name, "end"))


def test_every_learner_implements_the_protocol():
    from frugalrl.algos.dqn import DQN
    from frugalrl.algos.ppo import PPO
    from frugalrl.algos.sac import SAC
    from frugalrl.latent.train import LatentCurriculum

    assert isinstance(FakeLearner(), Learner)
    for cls in (PPO, DQN, SAC, LatentCurriculum):
        assert issubclass(cls, LearnerBase)
    config = tiny_config()
    from frugalrl.envs.factory import make_vec_env
    from frugalrl.learners import build_learner

    env = make_vec_env(config.env, gamma=config.ppo.gamma)
    agent = build_learner(config, env, CostMeter(), torch.device("cpu"))
    env.close()
    assert isinstance(agent, Learner) and agent.techniques == [] and agent.total_steps >= 1024


def test_callbacks_run_in_order_after_every_update():
    calls: list[tuple] = []
    learner = FakeLearner(num_updates=3)
    learner.start(0)
    ran = run_loop(learner, [Recorder("a", calls), Recorder("b", calls)])
    assert ran == 3 and learner.finished()
    names = [c[:2] for c in calls]
    assert names == [("a", "start"), ("b", "start"), ("a", 1), ("b", 1), ("a", 2), ("b", 2), ("a", 3), ("b", 3),
                     ("a", "end"), ("b", "end")]  # fmt: skip


def test_a_callback_adds_metrics_for_the_ones_after_it():
    calls: list[tuple] = []
    learner = FakeLearner(num_updates=1)
    learner.meter.seconds["env"] = 0.0
    run_loop(learner, [Throughput(learner.meter), Recorder("after", calls)])
    assert "sps" in calls[1][2] and calls[1][2]["episode_return"] == 1.0


def test_returning_false_stops_early_and_the_run_ends_normally():
    calls: list[tuple] = []
    learner = FakeLearner(num_updates=10)
    ran = run_loop(learner, [Recorder("stopper", calls, stop_at=3), Recorder("later", calls)])
    assert ran == 3 and learner.update == 3 and not learner.finished()
    assert ("later", 3) in [c[:2] for c in calls]  # the callbacks after it still saw the update
    assert calls[-1] == ("later", "end")


def test_a_raising_callback_aborts_like_the_tuners_pruning():
    class Pruned(Exception):
        pass

    def prune(learner: Any, metrics: dict[str, float]) -> None:
        if metrics["episode_return"] >= 2:
            raise Pruned(f"pruned at step {learner.global_step}")

    calls: list[tuple] = []
    learner = FakeLearner(num_updates=10)
    with pytest.raises(Pruned, match="pruned at step 8"):
        run_loop(learner, [OnUpdate(prune), Recorder("after", calls)])
    assert learner.update == 2 and ("after", "end") not in calls


def test_checkpointer_writes_every_n_updates_and_after_the_last(tmp_path):
    saved: list[int] = []

    def state(learner: Any) -> dict[str, Any]:
        saved.append(learner.update)
        return learner.state_dict()

    learner = FakeLearner(num_updates=5)
    run_loop(learner, [Checkpointer(tmp_path / "checkpoint.pt", state, every=2)])
    assert saved == [2, 4, 5]
    assert load_checkpoint(tmp_path / "checkpoint.pt") == {"format": "fake", "update": 5, "global_step": 20}
    saved.clear()
    stopped = FakeLearner(num_updates=10)
    run_loop(stopped, [Recorder("stop", [], stop_at=3), Checkpointer(tmp_path / "early.pt", state, every=2)])
    assert saved == [2, 3]  # an early stop still leaves its last update to resume from


def test_metrics_log_writes_the_learners_rows(tmp_path):
    learner = FakeLearner(num_updates=2)
    with (tmp_path / "metrics.jsonl").open("w") as handle:
        run_loop(learner, [MetricsLog(handle)])
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows == [{"update": 1, "step": 4, "episode_return": 1.0}, {"update": 2, "step": 8, "episode_return": 2.0}]


def test_train_takes_extra_callbacks_and_stops_early(tmp_path):
    from frugalrl.training import train

    seen: list[int] = []

    class StopAfterThree(Callback):
        def on_update(self, learner: Learner, metrics: dict[str, Any]) -> bool:
            seen.append(learner.update)
            return learner.update < 3  # tiny_config checkpoints every 2 updates: 3 is saved on the way out

    summary = train(tiny_config(), tmp_path / "run", interactive=False, callbacks=[StopAfterThree()])
    assert seen == [1, 2, 3] and summary["updates"] == 3
    assert len((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()) == 3
    assert load_checkpoint(tmp_path / "run" / "checkpoint.pt")["agent"]["update"] == 3


def test_a_cpu_budget_ends_training_and_every_row_carries_the_cpu_seconds(tmp_path):
    import time

    from frugalrl.training import train

    budget = time.process_time() + 2.0  # the budget counts this process's CPU-seconds, set-up included
    config = tiny_config(ppo={"total_timesteps": 10_000_000}, cpu_budget_s=budget)
    summary = train(config, tmp_path / "run", interactive=False)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert summary["stopped_by_cpu_budget"] is True
    assert summary["real_env_steps"] < 10_000_000
    assert rows[-1]["cpu_s"] >= budget
    assert [r["cpu_s"] for r in rows] == sorted(r["cpu_s"] for r in rows)
    unbudgeted = train(tiny_config(), tmp_path / "plain", interactive=False)
    assert "stopped_by_cpu_budget" not in unbudgeted
    assert tiny_config().hash() == tiny_config(cpu_budget_s=None).hash()  # the default, stated or not


def test_the_cpu_budget_stops_at_the_first_update_past_it():
    from frugalrl.loop import CpuBudget

    clock = iter([1.0, 2.5, 3.0, 3.5])
    budget = CpuBudget(3.0, clock=lambda: next(clock))
    assert run_loop(FakeLearner(num_updates=10), [budget]) == 3 and budget.stopped
    assert not CpuBudget(99.0).stopped


def test_the_cpu_budget_decides_on_the_rows_cpu_seconds_where_the_row_has_them():
    from frugalrl.loop import CpuBudget

    budget = CpuBudget(3.0, clock=lambda: 100.0)  # a clock read after the row: past the budget
    assert budget.on_update(FakeLearner(num_updates=1), {"cpu_s": 2.999}) is None and not budget.stopped
    assert budget.on_update(FakeLearner(num_updates=1), {"cpu_s": 3.0}) is False and budget.stopped


def test_train_does_not_import_the_cli_and_python_m_frugalrl_runs_it():
    code = "import sys, frugalrl.training, frugalrl.peft.compare, frugalrl.tuning; print('frugalrl.cli' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    for module in ("frugalrl/peft/compare.py", "frugalrl/tuning.py", "frugalrl/latent/train.py"):
        text = (REPO / "src" / module).read_text()
        assert "from frugalrl.training import start_run_dir" not in text and "import finish_run" not in text
    proc = subprocess.run([sys.executable, "-m", "frugalrl", "train", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "--resume" in proc.stdout


RECORDING = REPO / "benchmarks" / "results" / "summary_equivalence_baseline.json"
# run as typed from the repository root (its cwd): ``python -m benchmarks.summary_equivalence --check ...``
CHECK = [sys.executable, "-m", "benchmarks.summary_equivalence", "--check", str(RECORDING)]


def _equivalence_module():
    from benchmarks import summary_equivalence

    return summary_equivalence


@pytest.mark.slow  # about a minute on one core: six short training runs
def test_summaries_match_the_recorded_baseline():
    """The deterministic figures of short runs equal the recorded ones, on any host (see the script's docstring)."""
    proc = subprocess.run(CHECK, capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_there_is_one_recording_and_it_names_the_cpu_and_commit_it_was_made_on():
    recordings = sorted((REPO / "benchmarks" / "results").glob("summary_equivalence_baseline*.json"))
    assert recordings == [RECORDING]  # a new host needs no recording of its own
    machine = json.loads(RECORDING.read_text())["_machine"]
    assert machine["cpu"].count(", ") == 2 and machine["recorded_with_commit"]


def _perturbed(value, rel):
    if isinstance(value, dict):
        return {k: _perturbed(v, rel) for k, v in value.items()}
    if isinstance(value, list):
        return [_perturbed(v, rel) for v in value]
    return value * (1 + rel) if isinstance(value, float) else value


def test_the_check_passes_every_float_figure_moved_by_float_rounding():
    """Every float of the recording (returns, losses, diagnostics) moved by a relative 1e-7, as
    another CPU's rounding moves them: the same rule on every host, the recording's own included."""
    module = _equivalence_module()
    recording = json.loads(RECORDING.read_text())
    for name in module.RUNS:
        moved = _perturbed(recording[name], 1e-7)
        flops = module.EXACT_KEYS & moved.keys()
        moved.update({key: recording[name][key] for key in flops})  # counts, not rounding: kept exact
        assert moved != recording[name]
        assert module.verdict(recording[name], moved) == (True, "equal (floats within rounding)"), name


def test_the_check_fails_for_a_count_a_config_hash_or_a_flop_count_that_moved():
    module = _equivalence_module()
    before = json.loads(RECORDING.read_text())["cartpole-ppo"]
    for key, value in [("updates", before["updates"] + 1), ("config_hash", "0" * 16),
                       ("train_flops", before["train_flops"] * (1 + 1e-9))]:  # fmt: skip
        ok, line = module.verdict(before, {**before, key: value})
        assert not ok and key in line
    rows = [dict(row) for row in before["metrics_jsonl"]["rows"]]
    rows[-1]["value_loss"] *= 1.001
    ok, line = module.verdict(before, {**before, "metrics_jsonl": {**before["metrics_jsonl"], "rows": rows}})
    assert not ok and "value_loss" in line


@pytest.mark.slow
@pytest.mark.parametrize(
    "change",
    [["ppo.learning_rate=1.1e-3"], ["ppo.total_timesteps=2304"]],  # the recording: 1e-3; 2048 (8 updates of 256)
    ids=["learning-rate", "one-more-update"],
)
def test_the_check_fails_for_a_real_change_of_the_run(change):
    sets = [arg for item in change for arg in ("--set", item)]
    proc = subprocess.run([*CHECK, "--only", "cartpole-ppo", *sets], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "cartpole-ppo" in proc.stdout and "DIFFERS" in proc.stdout


def test_update_accounting_writes_config_hashes_where_the_figures_match_the_main_or_the_vendors(tmp_path, monkeypatch):
    module = _equivalence_module()
    vendor = module.cpu_model().split(",")[0]
    main = {"config_hash": "old", "eval_mean": 1.0, "train_flops": 10}
    kept = {"b": {**main, "eval_mean": 2.0, "_machine": {"cpu": module.cpu_model()}}}
    # another vendor's kept figures of "a" (its own floats, diagnostics): they take the CPU-independent keys only
    elsewhere = {"a": {**main, "eval_mean": 1.5, "diagnostics": {"wm_x": 0.5}, "_machine": {"cpu": "Other, X"}}}
    recording = {"_machine": {"cpu": "another CPU"}, "a": dict(main), "b": dict(main), "c": dict(main),
                 module.PARTED: {vendor: kept, "Other": elsewhere}}  # fmt: skip
    path = tmp_path / "recording.json"
    path.write_text(json.dumps(recording))
    results = {"a": {**main, "config_hash": "new", "train_flops": 11},  # main figures, a new key
               "b": {**main, "config_hash": "new", "eval_mean": 2.0},  # this vendor's kept figures
               "c": {**main, "config_hash": "new", "eval_mean": 3.0}}  # learning changed: refused  # fmt: skip
    monkeypatch.setattr(module, "run_all", lambda names: results)
    assert module.update_accounting([path], ["a", "b", "c"]) == 1
    after = json.loads(path.read_text())
    assert after["a"] == {**main, "config_hash": "new", "train_flops": 11}
    assert after[module.PARTED]["Other"]["a"] == {**elsewhere["a"], "config_hash": "new", "train_flops": 11}
    assert after["b"]["config_hash"] == "new" and after["b"]["eval_mean"] == 1.0  # the main floats stay the AMD ones
    assert after[module.PARTED][vendor]["b"]["config_hash"] == "new"
    assert after["c"] == main
