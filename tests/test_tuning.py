"""Optuna tuning: TPE + pruning on real training, MLflow runs per trial, workers sharing a Postgres study."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import optuna
import pytest
from mlflow import MlflowClient
from optuna.storages import RetryHeartbeatStaleTrialCallback
from optuna.trial import TrialState

from frugalrl.config import load_config
from frugalrl.errors import ConfigError
from frugalrl.tuning import storage_for, tune
from frugalrl.tuning_rounds import counted

from .conftest import REPO, needs_postgres, tiny_config

CONFIG = REPO / "configs" / "cartpole-tune.yaml"
FAST = ["ppo.total_timesteps=1024", "ppo.num_steps=32", "eval.episodes=2", "tuning.report_every_updates=1"]
POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"


def _worker(out, worker: int, overrides: list[str], env: dict) -> subprocess.Popen:
    sets = [a for o in overrides for a in ("--set", o)]
    return subprocess.Popen(
        [sys.executable, "-m", "frugalrl.cli", "tune", "-c", str(CONFIG), "-o", str(out), "--worker", str(worker),
         *sets],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_tuning_finds_best_and_logs_one_mlflow_run_per_trial(tmp_path):
    config = load_config(CONFIG, [*FAST, "tuning.trials=3", "tracking.experiment=tune-test"])
    result = tune(config, tmp_path / "tune")
    assert result["trials"]["complete"] + result["trials"]["pruned"] == 3
    best = json.loads((tmp_path / "tune" / "best.json").read_text())
    assert set(best["best_params"]) == {"ppo.learning_rate", "ppo.gae_lambda", "ppo.update_epochs"}
    assert 1e-4 <= best["best_params"]["ppo.learning_rate"] <= 3e-3
    assert (tmp_path / "tune" / best["best_run_dir"].split("/")[-1] / "summary.json").exists()
    client = MlflowClient()
    experiment = client.get_experiment_by_name("tune-test")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if r.info.run_name.endswith("tune-worker0")]
    trials = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    assert len(parents) == 1 and len(trials) == 3
    assert all("ppo.learning_rate" in r.data.params for r in trials)


def test_trials_the_server_missed_wait_in_the_worker_directory_and_sync_sends_them_once(tmp_path, monkeypatch,
                                                                                      capsys):  # fmt: skip
    from frugalrl.tracking import trial_run, trials
    from frugalrl.tracking.offline import OFFLINE_FILE, pending, sync_run_dir

    def away(*args, **kwargs):
        raise ConnectionError("the server is away")

    log_trial = trial_run.log_trial
    monkeypatch.setattr(trials, "log_trial", away)  # every trial's run fails, the worker's own does not
    monkeypatch.setattr(trials, "FINISH_PATIENCE_S", 0.2)
    out = tmp_path / "tune"
    tune(load_config(CONFIG, [*FAST, "tuning.trials=2", "tracking.experiment=tune-late", "tracking.reconnect_s=0.1"]),
         out)  # fmt: skip
    assert [e["number"] for e in pending(out) if e["kind"] == "trial"] == [0, 1]
    assert f"send them with `frugalrl sync {out}`" in capsys.readouterr().err
    client = MlflowClient()
    experiment = client.get_experiment_by_name("tune-late").experiment_id
    assert len(client.search_runs([experiment])) == 1  # the worker's run only

    monkeypatch.setattr(trials, "log_trial", log_trial)  # the server answers again
    assert "2 trials" in sync_run_dir(out)
    assert "nothing was waiting" in sync_run_dir(out) and not (out / OFFLINE_FILE).exists()
    best = json.loads((out / "best.json").read_text())
    worker, config = best["mlflow_run_id"], load_config(CONFIG)
    study = optuna.load_study(study_name=best["study"], storage=storage_for(config, out))
    runs = [r for r in client.search_runs([experiment]) if r.info.run_id != worker]
    assert sorted(r.data.tags["frugalrl.trial"] for r in runs) == [f"{study.study_name}/{n}" for n in (0, 1)]
    assert all(r.data.tags["mlflow.parentRunId"] == worker and r.info.status == "FINISHED" for r in runs)
    by_number = {int(r.data.tags["frugalrl.trial"].split("/")[-1]): r for r in runs}
    for trial in counted(study.get_trials()):
        assert by_number[trial.number].data.params == {k: str(v) for k, v in trial.params.items()}
        assert by_number[trial.number].data.metrics.get(config.tuning.metric) == trial.value  # None: pruned


def test_a_trial_run_made_twice_by_a_retried_create_is_kept_once():
    """MLflow's client retries a POST whose answer was late; the store then holds two runs of one trial."""
    from frugalrl.tracking.trial_run import TRIAL_TAG, log_trial

    client = MlflowClient()
    experiment = client.create_experiment("trial-twins")
    worker = client.create_run(experiment).info.run_id
    create_run = client.create_run
    client.create_run = lambda *args, **kwargs: [create_run(*args, **kwargs) for _ in range(2)][-1]
    entry = {"kind": "trial", "key": "study/0", "number": 0, "state": "COMPLETE", "params": {"ppo.gae_lambda": "0.9"},
             "metric": "eval_mean", "value": 120.0}  # fmt: skip
    log_trial(client, experiment, worker, entry)
    log_trial(client, experiment, worker, entry)  # sent again (a sync after a retry): still one run
    runs = [r for r in client.search_runs([experiment]) if r.info.run_id != worker]
    assert len(runs) == 1 and runs[0].data.tags[TRIAL_TAG] == "study/0" and runs[0].info.status == "FINISHED"
    assert runs[0].data.metrics == {"eval_mean": 120.0} and runs[0].data.params == {"ppo.gae_lambda": "0.9"}


def test_empty_space_is_a_config_error(tmp_path):
    config = load_config(CONFIG, ["tuning.space={}"])
    with pytest.raises(ConfigError, match="no tuning.space"):
        tune(config, tmp_path / "t")


@pytest.mark.slow
@needs_postgres
def test_two_workers_share_one_postgres_study(tmp_path):
    study = f"two-workers-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "OPTUNA_STORAGE": POSTGRES}
    overrides = [*FAST, "tuning.trials=4", f"tuning.study_name={study}", "tracking.enabled=false"]
    workers = [_worker(tmp_path / f"w{i}", i, overrides, env) for i in range(2)]
    for proc in workers:
        assert proc.wait(timeout=300) == 0, proc.stderr.read()
    trials = optuna.load_study(study_name=study, storage=POSTGRES).get_trials()
    # a surplus draw (two workers asked at once) ends pruned before it runs, with no run_dir: it does not count
    done = [t for t in counted(trials) if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    assert len(done) >= 4 and len({t.number for t in trials}) == len(trials)
    dirs = {t.user_attrs["run_dir"].split("/")[-2] for t in done}
    assert dirs == {"w0", "w1"}  # both workers took trials from the one study


@pytest.mark.slow
@needs_postgres
def test_killed_worker_trial_is_failed_and_retried_never_lost(tmp_path):
    study = f"killed-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "OPTUNA_STORAGE": POSTGRES}
    common = [f"tuning.study_name={study}", "tracking.enabled=false", "tuning.heartbeat_s=1", "tuning.pruner=none"]
    first = _worker(tmp_path / "a", 0, [*FAST, *common, "tuning.trials=2"], env)
    assert first.wait(timeout=300) == 0, first.stderr.read()
    slow = _worker(tmp_path / "b", 1, [*common, "tuning.trials=3", "ppo.total_timesteps=500000"], env)
    storage = optuna.storages.RDBStorage(POSTGRES)
    deadline = time.time() + 120
    while time.time() < deadline:
        states = [t.state for t in optuna.load_study(study_name=study, storage=storage).get_trials()]
        if TrialState.RUNNING in states:
            break
        time.sleep(0.5)
    time.sleep(2)  # let it train (and beat its heart) for a moment
    slow.send_signal(signal.SIGKILL)
    slow.wait()
    time.sleep(4)  # past the grace period (3 heartbeats)
    last = _worker(tmp_path / "c", 2, [*FAST, *common, "tuning.trials=4"], env)
    assert last.wait(timeout=300) == 0, last.stderr.read()
    trials = optuna.load_study(study_name=study, storage=storage).get_trials()
    failed = [t for t in trials if t.state == TrialState.FAIL]
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(failed) == 1
    retried = [t for t in complete if RetryHeartbeatStaleTrialCallback.retried_trial_number(t) == failed[0].number]
    assert len(retried) == 1 and retried[0].params == failed[0].params
    assert len(complete) == 4  # the two trials done before the kill are still there


def test_the_config_itself_is_the_first_point_searched():
    from frugalrl.config import SearchDimension
    from frugalrl.tuning import config_point

    config = tiny_config()
    space = {
        "ppo.learning_rate": SearchDimension(type="float", low=1e-4, high=3e-3, log=True),
        "ppo.update_epochs": SearchDimension(type="int", low=1, high=4),
    }
    assert config_point(config, space) == {"ppo.learning_rate": config.ppo.learning_rate, "ppo.update_epochs": 2}
    space["ppo.learning_rate"] = SearchDimension(type="float", low=1e-2, high=1e-1)  # the config lies outside
    assert config_point(config, space) is None


def _study_trials(storage: str, study: str) -> list[tuple]:
    """(number, state, params, value) of every counted trial, in trial order."""
    from frugalrl.tuning_rounds import counted

    trials = counted(optuna.load_study(study_name=study, storage=storage).get_trials())
    return [(t.number, t.state.name, t.params, t.value) for t in sorted(trials, key=lambda t: t.number)]


@pytest.mark.slow
def test_tuning_is_reproducible_with_one_worker_or_two(tmp_path):
    """Same study seed: the same trials, values and best parameters from one worker and from two
    (twice), whichever worker takes which trial and whenever it finishes."""
    overrides = [*FAST, "tuning.trials=6", "tuning.round_size=2", "tuning.startup_trials=1", "tracking.enabled=false"]
    runs = []
    for name, workers in (("one", 1), ("two-a", 2), ("two-b", 2)):
        storage = f"sqlite:///{tmp_path / name}.db"
        env = {**os.environ, "OPTUNA_STORAGE": storage}
        procs = [_worker(tmp_path / name / f"w{i}", i, overrides, env) for i in range(workers)]
        for proc in procs:
            assert proc.wait(timeout=600) == 0, proc.stderr.read()
        runs.append(_study_trials(storage, "cartpole-tune"))
        best = [json.loads((tmp_path / name / f"w{i}" / "best.json").read_text()) for i in range(workers)]
        assert all(b["best_params"] == best[0]["best_params"] for b in best)  # every worker names the same best
        runs[-1].append(best[0]["best_params"])
    assert len(runs[0]) == 6 + 1  # six counted trials and the best
    assert runs[0] == runs[1] == runs[2]
    assert {number for number, *_ in runs[1][:-1]} == set(range(6))


def test_numbered_sampler_ignores_trials_of_the_same_round():
    """Trial n sees the finished trials of earlier rounds only: one that finished early in its own
    round changes nothing."""
    from frugalrl.config import SearchDimension
    from frugalrl.tuning_rounds import NumberedSampler

    space = {"ppo.learning_rate": SearchDimension(type="float", low=1e-4, high=1e-2, log=True)}

    def proposal(finished_in_round: bool) -> dict:
        study = optuna.create_study(direction="maximize")
        for number in range(4):  # rounds of 2: trials 0-3 are two earlier rounds, all complete
            study.add_trial(optuna.trial.create_trial(params={"ppo.learning_rate": 1e-3 * (number + 1)},
                                                      distributions=_dists(space), value=float(number)))  # fmt: skip
        if finished_in_round:  # trial 4, of trial 5's round, already done
            study.add_trial(optuna.trial.create_trial(params={"ppo.learning_rate": 1e-4},
                                                      distributions=_dists(space), value=99.0))  # fmt: skip
        else:
            study.add_trial(optuna.trial.create_trial(state=TrialState.RUNNING))
        return NumberedSampler(space, seed=7, round_size=2).params_for(study, 5)

    assert proposal(True) == proposal(False)
    other_seed = NumberedSampler(space, seed=8, round_size=2)
    assert other_seed.params_for(optuna.create_study(), 0) != NumberedSampler(space, 7, 2).params_for(
        optuna.create_study(), 0
    )


def _dists(space):
    from frugalrl.tuning_rounds import distributions

    return distributions(space)


def test_hyperband_is_refused_in_one_line():
    with pytest.raises(ConfigError, match="not be reproducible"):
        load_config(CONFIG, ["tuning.pruner=hyperband"])


def test_a_pod_without_a_shared_study_is_refused(tmp_path, monkeypatch):
    """In a pod each worker's sqlite file would be a study of its own, lost with the pod: one line naming
    the Secret's key to add; a shared storage (environment or config) is used as anywhere else."""
    config = load_config(CONFIG, FAST)
    assert config.tuning is not None and not config.tuning.storage
    monkeypatch.delenv("OPTUNA_STORAGE", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KFP_POD_NAME", "frugalrl-tune-worker-abc")
    monkeypatch.setenv("FRUGALRL_TRACKING_SECRET", "team-mlflow")
    with pytest.raises(ConfigError) as refused:
        storage_for(config, tmp_path)
    message = str(refused.value)
    assert "no OPTUNA_STORAGE and no tuning.storage" in message and "to the Secret team-mlflow" in message
    assert "\n" not in message and not (tmp_path / "optuna.db").exists()
    journal = tmp_path / "shared" / "study.log"
    monkeypatch.setenv("OPTUNA_STORAGE", str(journal))  # a shared storage by environment (a journal: no server)
    assert isinstance(storage_for(config, tmp_path), optuna.storages.JournalStorage)
    monkeypatch.delenv("OPTUNA_STORAGE")
    configured = load_config(CONFIG, [*FAST, f"tuning.storage={journal}"])
    assert isinstance(storage_for(configured, tmp_path), optuna.storages.JournalStorage)  # or by config
    monkeypatch.delenv("KFP_POD_NAME")  # off a cluster: a sqlite study beside the run, as before
    storage_for(config, tmp_path)
    assert (tmp_path / "optuna.db").is_file()


def test_a_search_key_the_config_lacks_is_refused_before_anything_is_written(tmp_path):
    from frugalrl.tuning import tune

    from .conftest import tiny_config

    config = tiny_config(tuning={"trials": 2, "space": {"ppo.lr": {"type": "float", "low": 1e-4, "high": 1e-3}}})
    with pytest.raises(ConfigError, match=r"tuning.space key 'ppo.lr' is not a key of this config \(ppo has: .*"
                                          r"learning_rate"):  # fmt: skip
        tune(config, tmp_path / "tune")
    assert not (tmp_path / "tune").exists()
