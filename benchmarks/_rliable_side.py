"""rliable's IQM and stratified-bootstrap interval for score matrices read from stdin; runs in rliable's venv.

Not this project's venv: rliable 1.2.0 needs ``arch<8``, and arch 7 does not import under this project's
pandas 3, so ``benchmarks/rliable_check.py`` calls this file with the Python of a venv made by
``make rliable-venv`` (rliable 1.2.0, arch 7, pandas 2). It imports nothing from frugalrl.

stdin: ``{"reps": int, "seed": int, "scores": {name: [[score of run r on task t, ...], ...]}}``
stdout: ``{"rliable": version, "estimates": {name: [iqm, low, high]}}``

or, for the probability of improvement, ``{"reps", "seed", "pairs": {name: [X runs x tasks, Y runs x tasks]}}``
in and ``{"rliable": version, "improvement": {name: [P(X > Y), low, high]}}`` out.
"""

from __future__ import annotations

import json
import sys
import warnings
from importlib.metadata import version

import numpy as np
from rliable import library, metrics


def main() -> None:
    # arch 7 warns that rliable's ``random_state`` keyword is deprecated; it still seeds the draws
    warnings.filterwarnings("ignore", category=FutureWarning, module="arch")
    request = json.load(sys.stdin)
    if "pairs" in request:
        pairs = {name: tuple(np.asarray(m, dtype=float) for m in xy) for name, xy in request["pairs"].items()}
        points, intervals = library.get_interval_estimates(
            pairs, metrics.probability_of_improvement, reps=request["reps"],
            random_state=np.random.RandomState(request["seed"]),
        )  # fmt: skip
        improvement = {}
        for name in pairs:
            low, high = np.asarray(intervals[name]).ravel()[:2]
            improvement[name] = [float(np.asarray(points[name]).ravel()[0]), float(low), float(high)]
        json.dump({"rliable": version("rliable"), "improvement": improvement}, sys.stdout)
        return
    scores = {name: np.asarray(matrix, dtype=float) for name, matrix in request["scores"].items()}
    points, intervals = library.get_interval_estimates(
        scores,
        lambda matrix: np.array([metrics.aggregate_iqm(matrix)]),
        reps=request["reps"],
        random_state=np.random.RandomState(request["seed"]),
    )
    estimates = {name: [float(points[name][0]), *(float(x) for x in intervals[name][:, 0])] for name in scores}
    json.dump({"rliable": version("rliable"), "estimates": estimates}, sys.stdout)


if __name__ == "__main__":
    main()
