"""Reproducible tuning: a trial's parameters and pruning depend on its number, never on timing.

Optuna's own samplers and pruners read the study as it is when they are called: with two
workers, which trials have finished by then depends on timing, so two runs of one pipeline can
propose different parameters (seen: a learning rate of 0.001 against 0.00044). Here the trials
go in numbered rounds of ``tuning.round_size``:

- trial ``n``'s parameters come from a TPE sampler seeded by (study seed, ``n``) that sees the
  finished trials of earlier rounds only, in trial order (trial 0 is the config's own point when
  it lies in the space); a worker that draws the first trial of a round waits until every
  trial of the rounds before it has finished;
- a trial is pruned against the finished trials of earlier rounds only (median rule, as
  Optuna's ``MedianPruner``);
- a study holds exactly ``tuning.trials`` counted trials: a trial drawn beyond them (two
  workers asking at once) ends at once, unrun, marked ``surplus``, and counts for nothing;
  a trial failed for a stale heartbeat and re-queued counts once, as its retry.

So one worker and four give the same trials, the same values and the same best parameters; what
it costs is waiting at round boundaries (each trial's wait is kept as its ``waited_s``).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from optuna.pruners import BasePruner
from optuna.samplers import BaseSampler

from frugalrl.config import SearchDimension

POLL_S = 0.5


def distributions(space: dict[str, SearchDimension]) -> dict[str, Any]:
    """The Optuna distribution of every dimension, as ``frugalrl.tuning.suggest`` asks for it."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    made: dict[str, Any] = {}
    for key, dim in space.items():
        if dim.type == "categorical":
            made[key] = CategoricalDistribution(dim.choices)
        elif dim.type == "int":
            made[key] = IntDistribution(int(dim.low), int(dim.high), log=dim.log)
        else:
            made[key] = FloatDistribution(dim.low, dim.high, log=dim.log)
    return made


def retried_numbers(trials: list[Any]) -> set[int]:
    """Numbers of trials failed for a stale heartbeat whose parameters were re-queued as another trial."""
    import warnings

    import optuna
    from optuna.storages import RetryHeartbeatStaleTrialCallback

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        found = [RetryHeartbeatStaleTrialCallback.retried_trial_number(t) for t in trials]
    return {number for number in found if number is not None}


def counted(trials: list[Any]) -> list[Any]:
    """The trials that count toward ``tuning.trials``: every one except surplus draws and re-queued failures."""
    retried = retried_numbers(trials)
    return [t for t in trials if not t.user_attrs.get("surplus") and t.number not in retried]


def round_start(number: int, round_size: int) -> int:
    return number - number % round_size


def finished_before(study: Any, number: int) -> list[Any]:
    """Complete and pruned counted trials numbered below ``number``, in trial order."""
    from optuna.trial import TrialState

    done = (TrialState.COMPLETE, TrialState.PRUNED)
    return sorted((t for t in counted(study.get_trials(deepcopy=False)) if t.number < number and t.state in done),
                  key=lambda t: t.number)  # fmt: skip


def wait_for_earlier_rounds(study: Any, number: int, round_size: int) -> float:
    """Block until every trial before ``number``'s round has finished; the seconds waited.

    A worker that died leaves a RUNNING trial whose heartbeat goes stale: failing it here (and
    re-queuing it) is what lets the wait end."""
    import warnings

    import optuna
    from optuna.trial import TrialState

    start, began = round_start(number, round_size), time.monotonic()
    while True:
        earlier = [t for t in study.get_trials(deepcopy=False) if t.number < start]
        if all(t.state.is_finished() for t in earlier) and len(earlier) == start:
            return time.monotonic() - began
        if any(t.state == TrialState.RUNNING for t in earlier):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                optuna.storages.fail_stale_trials(study)
        time.sleep(POLL_S)


class NumberedSampler(BaseSampler):
    """Trial ``n``'s parameters from (``seed``, ``n``) and the finished trials of earlier rounds only.

    A TPE sampler seeded per trial proposes on a scratch in-memory study that holds exactly those
    trials, so what it proposes does not depend on which worker asks or when."""

    def __init__(self, space: dict[str, SearchDimension], seed: int, round_size: int,
                 first_point: dict[str, Any] | None = None) -> None:  # fmt: skip
        self._space = distributions(space)
        self._seed, self._round_size, self._first = seed, round_size, first_point
        self._proposed: dict[int, dict[str, Any]] = {}
        self.waited_s: dict[int, float] = {}

    def infer_relative_search_space(self, study: Any, trial: Any) -> dict[str, Any]:
        return {}

    def sample_relative(self, study: Any, trial: Any, search_space: dict[str, Any]) -> dict[str, Any]:
        return {}

    def sample_independent(self, study: Any, trial: Any, param_name: str, param_distribution: Any) -> Any:
        return self.params_for(study, trial.number)[param_name]

    def params_for(self, study: Any, number: int) -> dict[str, Any]:
        if number not in self._proposed:
            self.waited_s[number] = wait_for_earlier_rounds(study, number, self._round_size)
            self._proposed[number] = self._propose(study, number)
        return self._proposed[number]

    def _propose(self, study: Any, number: int) -> dict[str, Any]:
        import optuna

        if number == 0 and self._first is not None:
            return dict(self._first)  # the config as given: tuning returns nothing worse than it
        trial_seed = int(np.random.SeedSequence([self._seed, number]).generate_state(1)[0])
        scratch = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=trial_seed))
        scratch.add_trials(finished_before(study, round_start(number, self._round_size)))
        return scratch.ask(self._space).params


class OrderedMedianPruner(BasePruner):
    """Optuna's median rule against the finished trials of earlier rounds only (never against
    whatever another worker happens to have reported by now)."""

    def __init__(self, startup_trials: int, round_size: int) -> None:
        self._startup, self._round_size = startup_trials, round_size

    def prune(self, study: Any, trial: Any) -> bool:
        step = trial.last_step
        if step is None:
            return False
        earlier = finished_before(study, round_start(trial.number, self._round_size))
        if len(earlier) < self._startup:
            return False
        others = [t.intermediate_values[step] for t in earlier if step in t.intermediate_values]
        if not others:
            return False
        best_so_far = max(value for s, value in trial.intermediate_values.items() if s <= step)
        return best_so_far < float(np.median(others))


def best_trial(study: Any) -> Any:
    """The complete counted trial of highest value; a tie goes to the lowest number (not to storage order)."""
    from optuna.trial import TrialState

    complete = [t for t in counted(study.get_trials(deepcopy=False)) if t.state == TrialState.COMPLETE]
    if not complete:
        return None
    return max(complete, key=lambda t: (t.value, -t.number))
