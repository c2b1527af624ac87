"""Optuna tuning: a config's ``tuning.space`` searched with TPE, pruned on intermediate returns.

Every trial is a normal training run (``DIR/trial-N``) of the config with the sampled values as
overrides. During training the running episode return is reported every
``report_every_updates`` updates, and the median pruner stops hopeless trials. Parameters and
pruning decisions follow trial numbers, in rounds (``frugalrl.tuning_rounds``), so a study gives
the same trials and the same best parameters with one worker or several.

Storage (one study shared by every worker): ``OPTUNA_STORAGE`` if set (Postgres on a
cluster: ``postgresql://user@host/db``), else ``tuning.storage``, else ``DIR/optuna.db``
(sqlite). A path ending in ``.log`` is a journal file. Database storages run a heartbeat: a
worker that dies mid-trial leaves a trial that the next worker marks failed and re-queues with
the same parameters (``RetryHeartbeatStaleTrialCallback``), so no trial is lost. A study holds
exactly ``tuning.trials`` counted trials across all workers (``tuning_rounds.counted``).

With tracking on, ``frugalrl.tracking.trials.TrialLogger`` logs one MLflow run per trial (its
parameters and value), nested under this worker's tuning run, exactly once even when the server
is away as a trial ends.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from pathlib import Path
from typing import Any

from frugalrl.checkpoint import CHECKPOINT_FILE
from frugalrl.config import ExperimentConfig, SearchDimension, apply_overrides, flatten, validate_config
from frugalrl.credentials import reveal, shown
from frugalrl.errors import ConfigError, TrainingDiverged
from frugalrl.rundir import write_json
from frugalrl.runlock import LOCK_FILE
from frugalrl.tracking import RunTracker
from frugalrl.tracking.store import TRACKING_SECRET_ENV, database_silence, in_cluster
from frugalrl.tracking.trials import TrialLogger
from frugalrl.training import train
from frugalrl.tuning_rounds import NumberedSampler, OrderedMedianPruner, best_trial, counted

STORAGE_ENV = "OPTUNA_STORAGE"


def storage_for(config: ExperimentConfig, out: Path) -> Any:
    """The Optuna storage this tuning run shares with its sibling workers."""
    import optuna
    from optuna.storages import RetryHeartbeatStaleTrialCallback
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    tuning = config.tuning
    configured = reveal(tuning.storage, "tuning.storage", STORAGE_ENV)  # its password comes by environment
    url = os.environ.get(STORAGE_ENV) or configured
    if not url and in_cluster():  # each worker's pod would hold a study of its own, lost with the pod
        secret = os.environ.get(TRACKING_SECRET_ENV) or "frugalrl-tracking"
        raise ConfigError(
            f"this tuning step runs in a Kubernetes pod with no {STORAGE_ENV} and no tuning.storage, so its workers "
            f"could not share a study; add key {STORAGE_ENV} (a database URL) to the Secret {secret}"
        )
    url = url or f"sqlite:///{out / 'optuna.db'}"
    if url.endswith(".log"):
        Path(url).parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(JournalFileBackend(url))
    if url.startswith(("postgresql", "mysql")) and (silence := database_silence(url, config.tracking.timeout_s)):
        # one bounded connection (tracking.timeout_s), not the table-creation retries below
        raise ConfigError(
            f"Optuna storage {shown(url)} does not answer ({silence}); check {STORAGE_ENV} / tuning.storage"
        )
    last: Exception | None = None
    for attempt in range(5):  # workers starting together race to create the tables: the loser retries
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return _patient_storage(
                    url,
                    engine_kwargs={"pool_pre_ping": True},  # a connection the database dropped is not reused
                    heartbeat_interval=tuning.heartbeat_s,
                    grace_period=3 * tuning.heartbeat_s,
                    heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=tuning.max_retry),
                )
        except Exception as exc:  # sqlalchemy and driver errors vary
            last = exc
            time.sleep(0.5 * (attempt + 1))
    raise ConfigError(
        f"Optuna storage {shown(url)} is unusable ({shown(str(last).splitlines()[0])[:120]}); "
        f"check {STORAGE_ENV} / tuning.storage"
    ) from None


DATABASE_PATIENCE_S = 120.0  # how long a storage call waits out a database that is restarting


def _patient_storage(url: str, **kwargs: Any) -> Any:
    """Optuna's RDBStorage, except that a call failing because the database went away (a restart, a
    failover) is tried again for up to ``DATABASE_PATIENCE_S`` instead of ending the worker. Without
    it a restart of PostgreSQL stopped both tuning workers mid-study (tests/test_soak.py); the heartbeat
    thread goes through it too, so a live trial is not declared dead and run twice."""
    import functools

    from optuna.exceptions import StorageInternalError
    from optuna.storages import RDBStorage
    from sqlalchemy.exc import InterfaceError, OperationalError

    transient = (StorageInternalError, OperationalError, InterfaceError)

    def patiently(call: Any, *args: Any, **kw: Any) -> Any:
        deadline = time.monotonic() + DATABASE_PATIENCE_S
        while True:
            try:
                return call(*args, **kw)
            except transient:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1.0)

    class PatientRDBStorage(RDBStorage):
        def __getattribute__(self, name: str) -> Any:
            attribute = super().__getattribute__(name)
            # the public calls (each its own session), not the helpers inside one
            if callable(attribute) and (not name.startswith("_") or name in ("_get_trials", "_get_stale_trial_ids")):
                return functools.partial(patiently, attribute)
            return attribute

    return PatientRDBStorage(url, **kwargs)


def suggest(trial: Any, space: dict[str, SearchDimension]) -> list[str]:
    """Sample every dimension; the values as ``key=value`` overrides."""
    overrides = []
    for key, dim in space.items():
        if dim.type == "categorical":
            value = trial.suggest_categorical(key, dim.choices)
        elif dim.type == "int":
            value = trial.suggest_int(key, int(dim.low), int(dim.high), log=dim.log)
        else:
            value = trial.suggest_float(key, dim.low, dim.high, log=dim.log)
        overrides.append(f"{key}={json.dumps(value)}")
    return overrides


def config_point(config: ExperimentConfig, space: dict[str, SearchDimension]) -> dict[str, Any] | None:
    """The config's own values of the searched keys, when all lie in the space: the study's first trial,
    so tuning can only return something at least as good as the config it started from."""
    data = config.to_dict()
    point: dict[str, Any] = {}
    for key, dim in space.items():
        value: Any = data
        for part in key.split("."):
            if not isinstance(value, dict) or part not in value:
                return None
            value = value[part]
        if dim.type == "categorical":
            if value not in (dim.choices or []):
                return None
        elif not isinstance(value, int | float) or not (dim.low <= value <= dim.high):
            return None
        point[key] = value
    return point


def trial_config(config: ExperimentConfig, overrides: list[str]) -> ExperimentConfig:
    """The config a trial trains: the sampled overrides applied, tracking left to the MLflow callback."""
    data = apply_overrides(config.to_dict(), [*overrides, "tracking.enabled=false"], source="tuning")
    data["tuning"] = None
    return validate_config(data, source="tuning trial")


def _pruner(config: ExperimentConfig) -> Any:
    import optuna

    tuning = config.tuning
    if tuning.pruner == "median":
        return OrderedMedianPruner(tuning.startup_trials, tuning.round_size)
    return optuna.pruners.NopPruner()


def make_objective(config: ExperimentConfig, out: Path) -> Any:
    import optuna

    tuning = config.tuning

    def objective(trial: optuna.Trial) -> float:
        before = [t for t in counted(trial.study.get_trials(deepcopy=False)) if t.number < trial.number]
        if len(before) >= tuning.trials:
            # two workers asked at once: this one ends unrun, marked, and counts for nothing (tuning_rounds.counted)
            trial.set_user_attr("surplus", True)
            trial.study.stop()
            raise optuna.TrialPruned(f"surplus: the study already has its {tuning.trials} trials")
        overrides = suggest(trial, tuning.space)  # waits for the earlier rounds (tuning_rounds.NumberedSampler)
        trial.set_user_attr("waited_s", round(trial.study.sampler.waited_s.get(trial.number, 0.0), 3))
        trial.set_user_attr("overrides", overrides)
        run_config = trial_config(config, overrides)

        def report(agent: Any, metrics: dict[str, float]) -> None:
            if agent.update % tuning.report_every_updates == 0 and "episode_return" in metrics:
                trial.report(float(metrics["episode_return"]), step=agent.global_step)
                if trial.should_prune():
                    raise optuna.TrialPruned(f"pruned at step {agent.global_step}")

        run_dir = out / f"trial-{trial.number}"
        trial.set_user_attr("run_dir", str(run_dir))
        summary = train(run_config, run_dir, interactive=False, on_update=report)
        return float(summary[tuning.metric])

    return objective


def check_search_keys(config: ExperimentConfig) -> None:
    """Each ``tuning.space`` key names a key of this config (``ppo.lr`` does not); else a one-line ``ConfigError``.

    Checked when tuning starts, not when a config loads: a config whose kind a ``--set`` switched keeps a
    tuning section it will not use for training."""
    flat = flatten(config.to_dict())
    for key in config.tuning.space if config.tuning else {}:
        if key not in flat:
            parent = key.rpartition(".")[0]
            prefix = f"{parent}." if parent else ""
            known = sorted({k[len(prefix) :].split(".")[0] for k in flat if k.startswith(prefix)})
            raise ConfigError(f"tuning.space key {key!r} is not a key of this config ({parent or 'the top'} has: "
                              f"{', '.join(known) or 'no keys'}); see frugalrl config explain")  # fmt: skip


def check_tuning_dir(out: Path) -> None:
    """A study's ``--out`` is new, empty, or a study's own (its trials, ``best.json``, a local ``optuna.db``: a
    worker run again there adds to its study); anything else, another command's run included, is refused in
    one line before anything is written."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file, not a directory; give a new or empty directory")
    if not out.is_dir():
        return
    entries = sorted(p.name for p in out.iterdir() if p.name != LOCK_FILE)
    own = any(name in ("best.json", "optuna.db") or name.startswith("trial-") for name in entries)
    if entries and not own:
        trained = (out / CHECKPOINT_FILE).exists() or (out / "summary.json").exists()
        what = "a training run" if trained else "other files"
        raise ConfigError(
            f"--out {out} holds {what} ({len(entries)} entries, e.g. {entries[0]}), not a study's trials; nothing "
            "there is overwritten: pick a new or empty --out (or the --out of the study's earlier run, to add to it)"
        )


def tune(config: ExperimentConfig, out: Path, worker: int = 0, pipeline_run_id: str | None = None) -> dict[str, Any]:
    """Run this worker's share of the study; write ``DIR/best.json``; return the best trial.

    ``pipeline_run_id`` tags the worker's MLflow run with the pipeline run it belongs to."""
    import optuna
    from optuna.trial import TrialState

    if config.tuning is None or not config.tuning.space:
        raise ConfigError("this config has no tuning.space to search; see configs/cartpole-tune.yaml")
    check_search_keys(config)  # before anything is written: a missing key would fail every trial
    tuning = config.tuning
    out = Path(out)
    check_tuning_dir(out)
    out.mkdir(parents=True, exist_ok=True)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # Parameters and pruning follow trial numbers, not worker ids or timing (frugalrl.tuning_rounds):
    # every worker makes the same sampler, so the study does not depend on how many there are.
    sampler = NumberedSampler(tuning.space, config.seed, tuning.round_size, config_point(config, tuning.space))
    study = optuna.create_study(
        study_name=tuning.study_name or config.name,
        storage=storage_for(config, out),
        sampler=sampler,
        pruner=_pruner(config),
        direction="maximize",
        load_if_exists=True,
    )

    def enough(study: optuna.Study, trial: Any) -> None:
        if len(counted(study.get_trials(deepcopy=False))) >= tuning.trials:
            study.stop()

    callbacks: list[Any] = [enough]
    objective = make_objective(config, out)

    def run() -> None:
        if len(counted(study.get_trials(deepcopy=False))) < tuning.trials:
            study.optimize(objective, callbacks=callbacks, catch=(ConfigError, TrainingDiverged))

    run_id = None
    if config.tracking.enabled:
        # the worker's run keeps what the store missed in OUT (`frugalrl sync OUT` sends it, via best.json)
        with RunTracker(config, run_name=f"{config.name}-tune-worker{worker}", pipeline_run_id=pipeline_run_id,
                        buffer_dir=out) as tracker:  # fmt: skip
            run_id = tracker.run_id
            # the tracker's experiment, not a lookup: a store away right after the start must not stop the worker
            log_trials = TrialLogger(tracker.run_id, tracker.experiment_id, tuning.metric,
                                     config.tracking.reconnect_s, buffer_dir=out)  # fmt: skip
            callbacks.append(log_trials)
            run()
            log_trials.finish()
    else:
        run()
    best = best_trial(study)
    if best is None:
        raise ConfigError(f"study {study.study_name}: no trial completed (all pruned or failed); widen tuning.space")
    trials = counted(study.get_trials(deepcopy=False))
    result = {
        "study": study.study_name,
        "best_value": best.value,
        "best_params": best.params,
        "best_overrides": best.user_attrs.get("overrides", []),
        "best_run_dir": best.user_attrs.get("run_dir"),
        "trials": {state.name.lower(): sum(t.state == state for t in trials) for state in TrialState},
        "waited_s": round(sum(t.user_attrs.get("waited_s", 0.0) for t in trials), 3),
        "mlflow_run_id": run_id,  # this worker's run
    }

    write_json(out / "best.json", result)
    return result


def best_overrides(config: ExperimentConfig, out: Path | None = None) -> list[str]:
    """The best complete trial's overrides in the study ``config`` names (storage as in ``tune``)."""
    import optuna

    if config.tuning is None:
        raise ConfigError("this config has no tuning section")
    study = optuna.load_study(
        study_name=config.tuning.study_name or config.name, storage=storage_for(config, out or Path("."))
    )
    best = best_trial(study)
    if best is None:
        raise ConfigError(f"study {study.study_name} has no complete trial yet; run the tune workers first")
    return list(best.user_attrs.get("overrides", []))
