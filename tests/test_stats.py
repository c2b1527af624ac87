"""frugalrl.stats: the statistics evaluations, the promotion gate and the benchmarks report."""

from __future__ import annotations

import numpy as np
from scipy.stats import trim_mean

from frugalrl.stats import (
    bootstrap_ci,
    bootstrap_iqm_difference,
    interquartile_mean,
    paired_bootstrap,
    paired_one_sided,
    stratified_bootstrap_iqm,
    welch_one_sided,
)


def test_iqm_drops_the_tails():
    values = np.array([0, 1, 2, 3, 4, 5, 6, 100.0])
    assert interquartile_mean(values) == np.mean([2, 3, 4, 5])


def test_bootstrap_ci_brackets_the_mean_and_narrows_with_more_data():
    rng = np.random.default_rng(0)
    small, large = rng.normal(10, 3, 10), rng.normal(10, 3, 1000)
    lo_s, hi_s = bootstrap_ci(small)
    lo_l, hi_l = bootstrap_ci(large)
    assert lo_s < small.mean() < hi_s
    assert lo_l < large.mean() < hi_l
    assert hi_l - lo_l < hi_s - lo_s


def test_the_iqm_is_rliables_25_percent_trimmed_mean_for_every_size():
    rng = np.random.default_rng(1)
    for n in range(1, 40):
        values = rng.normal(size=n)
        assert np.isclose(interquartile_mean(values), trim_mean(values, 0.25)), n


def test_the_stratified_bootstrap_resamples_runs_within_each_task():
    """IQM with an interval over runs (seeds), tasks kept apart, seeded: the aggregate of the equal-CPU table."""
    point, low, high = stratified_bootstrap_iqm({"a": [1.0, 2.0, 3.0, 4.0]})
    assert point == 2.5 and low <= point <= high and (low, high) != (point, point)
    assert stratified_bootstrap_iqm({"a": [3.0] * 5}) == (3.0, 3.0, 3.0)  # no spread, no width
    # each task keeps its runs: a task of 0s and a task of 10s never resample into all 0s or all 10s
    _, low, high = stratified_bootstrap_iqm({"zeros": [0.0] * 3, "tens": [10.0] * 3})
    assert low == high == 5.0
    assert stratified_bootstrap_iqm({"a": [1.0, 5.0, 2.0]}) == stratified_bootstrap_iqm({"a": [1.0, 5.0, 2.0]})


def test_the_iqm_difference_has_an_interval_over_each_contenders_runs():
    """The curriculum against 100% real latent (issue 31): the difference of IQMs, resampled per contender."""
    point, low, high = bootstrap_iqm_difference([5.0, 6.0, 7.0], [1.0, 2.0, 3.0])
    assert point == 4.0 and 2.0 <= low < point < high <= 6.0  # apart: the interval excludes 0
    point, low, high = bootstrap_iqm_difference([1.0, 4.0, 2.0], [3.0, 1.0, 2.5])
    assert low < 0 < high  # overlapping runs: the interval holds 0
    assert bootstrap_iqm_difference([2.0] * 3, [2.0] * 3) == (0.0, 0.0, 0.0)


def test_the_gates_tests_say_better_only_with_support():
    champion = np.array([10.0, 12.0, 11.0, 9.0, 10.5])
    better, same = champion + np.array([3.0, 2.5, 3.5, 2.0, 3.0]), champion + np.array([0.5, -0.4, 0.2, -0.3, 0.0])
    assert paired_one_sided(better, champion) < 0.01 < paired_one_sided(same, champion)
    assert welch_one_sided(better, champion) < welch_one_sided(same, champion)
    low, high = paired_bootstrap(better, champion, 0.9)
    assert 2.0 <= low < high <= 3.5
    low, high = paired_bootstrap(same, champion, 0.9)
    assert low < 0 < high
    assert paired_one_sided(champion + 1.0, champion) == 0.0  # the same difference on every seed: exact


def test_no_statistic_is_defined_outside_the_statistics_module():
    """IQM, bootstrap intervals and the gate's tests live in frugalrl.stats alone: no other function of the
    product, its pipelines, scripts or benchmarks defines one or calls scipy's versions itself."""
    import ast
    import re

    from .conftest import REPO

    named = re.compile(r"(^|_)(iqm|interquartile|bootstrap|one_sided|trimmed)")
    scipy_calls = {"trim_mean", "ttest_ind", "ttest_1samp", "ttest_rel", "bootstrap"}
    found = []
    for folder in ("src", "benchmarks", "scripts", "pipelines", "components"):
        for path in sorted((REPO / folder).rglob("*.py")):
            if path == REPO / "src" / "frugalrl" / "stats.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and named.search(node.name):
                    found.append(f"{path.relative_to(REPO)}: def {node.name}")
                if isinstance(node, ast.Attribute) and node.attr in scipy_calls:
                    found.append(f"{path.relative_to(REPO)}: .{node.attr}")
                if isinstance(node, ast.ImportFrom) and any(a.name in scipy_calls for a in node.names):
                    found.append(f"{path.relative_to(REPO)}: imports {[a.name for a in node.names]}")
    assert found == []
