"""The benchmark harness (benchmarks/_harness.py) and the paired statistic (benchmarks/_report.py), issue 32.

Every benchmark script runs its contenders through the harness and compares them with these statistics,
so their rules are pinned here: the A B A B order, ratio of medians against median of per-seed ratios,
what a missing figure or a floor does. Fast and deterministic: no training run, one tiny subprocess.
"""

from __future__ import annotations

import json
import math
import os
import re

import pytest

from .conftest import REPO

BENCH = REPO / "benchmarks"


@pytest.fixture
def bench():
    from benchmarks import _harness, _report

    return _harness, _report


def test_contenders_alternate_within_every_seed(bench):
    harness, _ = bench
    assert harness.interleave([1, 2, 3], ["A", "B"]) == [(1, "A"), (1, "B"), (2, "A"), (2, "B"), (3, "A"), (3, "B")]
    # mirrored: every other seed in reverse, so no contender always runs first
    assert [c for _, c in harness.interleave(range(3), "ABC", mirror=True)] == list("ABCCBAABC")
    assert harness.interleave([], ["A", "B"]) == []


def test_ratio_of_medians_and_median_of_per_seed_ratios_are_two_figures(bench):
    _, report = bench
    pairs = [(1.0, 2.0), (4.0, 4.0), (9.0, 3.0)]  # A's median 4, B's median 3; per seed 0.5, 1, 3
    paired = report.paired_ratio(pairs)
    assert paired.of_medians == 4.0 / 3.0 and paired.per_seed == [0.5, 1.0, 3.0] and paired.median == 1.0
    assert paired.both == (4.0 / 3.0, 1.0) and report.paired_ratios(pairs) == paired.both
    assert paired.text() == "1.33 / 1.00" and paired.text("{:.3f}") == "1.333 / 1.000"


def test_a_floor_is_taken_off_both_sides_and_a_pair_at_the_floor_has_no_ratio(bench):
    _, report = bench
    # returns above a random policy's -10: (0 + 10) / (10 + 10) and (-5 + 10) / (-10 + 10): the second has none
    paired = report.paired_ratio([(0.0, 10.0), (-5.0, -10.0)], floor=-10.0)
    assert paired.per_seed == [0.5]
    assert paired.of_medians == (-2.5 + 10.0) / (0.0 + 10.0)
    assert math.isnan(report.paired_ratio([]).of_medians) and math.isnan(report.paired_ratio([]).median)
    assert math.isnan(report.ratio_of_medians([1.0], [2.0], floor=2.0))  # B's median at the floor


def test_runs_without_a_partner_count_in_the_medians_only_where_asked(bench):
    _, report = bench
    a, b = {1: 2.0, 2: 4.0, 3: 30.0}, {1: 1.0, 2: 2.0, 3: None}
    pairs = report.pair_up(a, b)
    assert pairs == [(2.0, 1.0), (4.0, 2.0)]  # seed 3 has no partner figure
    assert report.paired_ratio(pairs).of_medians == 3.0 / 1.5
    everything = report.paired_ratio(pairs, medians=([2.0, 4.0, 30.0], [1.0, 2.0]))
    assert everything.of_medians == 4.0 / 1.5 and everything.per_seed == [2.0, 2.0]


def test_paired_differences(bench):
    _, report = bench
    diff = report.paired_difference([(5.0, 1.0), (1.0, 2.0), (10.0, 4.0)])
    assert diff.of_medians == 5.0 - 2.0 and diff.per_seed == [4.0, -1.0, 6.0] and diff.median == 4.0
    assert math.isnan(report.paired_difference([]).of_medians)


def test_a_run_names_its_command_as_python_m_and_a_row_kept_before_is_shown_so_too(bench, monkeypatch):
    """Under ``-m``, ``sys.argv[0]`` is the module's file: the row says ``python -m benchmarks.x``. A row kept
    before benchmarks/ became a package says ``python benchmarks/x.py``: kept so, shown as it is typed today."""
    _, report = bench
    monkeypatch.setattr("sys.argv", [str(report.REPO_ROOT / "benchmarks" / "fusion.py"), "--seeds", "3"])
    assert report.command_line() == "python -m benchmarks.fusion --seeds 3"
    old = "python benchmarks/atari_equal_cpu.py --seeds 1 --encoder benchmarks/artifacts/atari-shared-encoder"
    today = "python -m benchmarks.atari_equal_cpu --seeds 1 --encoder benchmarks/artifacts/atari-shared-encoder"
    assert report.as_run_today(old) == today and report.as_run_today(today) == today
    rows = [{"command": old, "timestamp": "1", "batch": "a"}, {"command": "python -m benchmarks.atari_equal_cpu",
                                                               "timestamp": "2", "batch": "b"}]  # fmt: skip
    shown = report.rows_lines(rows, report.RESULTS_DIR / "atari_equal_cpu.jsonl")[0]
    assert shown == f"- command: `python -m benchmarks.atari_equal_cpu`, `{today}`"


def test_ratio_cells_of_returns_only_divide_positive_figures(bench):
    _, report = bench
    assert report.ratio_cells([2.0, 4.0], [1.0, 2.0]) == ("2.00", "2.00 (2.00-2.00)")
    # one seed without B's figure: it still counts in A's median, its ratio is left out (and said so)
    assert report.ratio_cells([2.0, 4.0, 6.0], [1.0, 2.0, None]) == ("2.67", "2.00 (2.00-2.00) [2/3 seeds]")
    # returns: a ratio only where both are above 0, a ratio of medians only where both medians are
    cells = report.ratio_cells([-3.0, 1.0], [1.0, 2.0], positive=True)
    assert cells == ("n/a (median return <= 0)", "0.50 (0.50-0.50) [1/2 seeds]")


def test_median_min_max_text(bench):
    _, report = bench
    assert report.mmm([3.0, 1.0, 2.0], "{:.1f}") == "2.0 (1.0-3.0)"
    assert report.mmm([-3.0, 1.0, 2.0], "{:.1f}") == "1.0 (-3.0 to 2.0)"  # a minus sign is no range dash
    assert report.mmm([], "{:.1f}") == "-"
    assert report.median_of([{"x": 1}, {"x": 5}, {"x": 2}], "x") == 2
    assert report.opt(None, "{:.1f}") == "-" and report.opt(None, "{:.1f}", "missed") == "missed"


def test_seeds_every_contender_ran_are_paired_and_the_others_named(bench):
    _, report = bench
    rows = [{"seed": 2, "contender": "a", "v": 1}, {"seed": 1, "contender": "b"}, {"seed": 1, "contender": "a"},
            {"seed": 2, "contender": "a", "v": 2}, {"seed": 3, "contender": "b"}]  # fmt: skip
    complete, incomplete = report.by_seed(rows, ["a", "b"])
    assert [entry["seed"] for entry in complete] == [1] and incomplete == [2, 3]
    complete, _ = report.by_seed(rows, ["a"])
    assert complete[-1]["a"]["v"] == 2  # the later row of a seed wins


def test_measure_keeps_one_row_per_run_in_the_order_of_the_jobs(bench, tmp_path, capsys):
    harness, _ = bench
    results = tmp_path / "rows.jsonl"
    rows = harness.measure(harness.interleave([1, 2], ["A", "B"]), lambda job: {"seed": job[0], "contender": job[1]},
                           results, {"batch": "b1"}, lambda row: f"{row['seed']} {row['contender']}")  # fmt: skip
    kept = [json.loads(line) for line in results.read_text().splitlines()]
    assert kept == rows and [(r["seed"], r["contender"]) for r in kept] == [(1, "A"), (1, "B"), (2, "A"), (2, "B")]
    assert all(r["batch"] == "b1" and {"load_before", "load_after", "timestamp"} <= r.keys() for r in kept)
    assert capsys.readouterr().out.splitlines() == ["1 A", "1 B", "2 A", "2 B"]
    assert harness.parallel(lambda x: x * x, [1, 2, 3], workers=2) == [1, 4, 9]  # in the jobs' order


def test_a_worker_runs_in_its_own_process_and_hands_back_json(bench, tmp_path):
    """``python -m MODULE``: a module in ``cwd`` here; the repository root last on its path, for ``benchmarks``."""
    harness, _ = bench
    (tmp_path / "bench_worker.py").write_text(
        "import json, os, sys\n"
        "args = sys.argv[1:]\n"
        "if args[0] == 'fail':\n"
        "    print('what went wrong'); sys.exit(3)\n"
        "json.dump({'pid': os.getpid(), 'arg': args[0], 'env': os.environ.get('BENCH_X'),"
        " 'path': os.environ['PYTHONPATH']}, open(args[args.index('--result') + 1], 'w'))\n"
    )
    result = harness.worker("bench_worker", ["ok"], env={"BENCH_X": "1", "PYTHONPATH": "/elsewhere"}, cwd=tmp_path)
    assert result["arg"] == "ok" and result["env"] == "1" and result["pid"] != os.getpid()
    assert result["path"].split(os.pathsep) == ["/elsewhere", str(REPO)]
    with pytest.raises(RuntimeError, match="what went wrong"):
        harness.worker("bench_worker", ["fail"], cwd=tmp_path)


def test_a_failed_frugalrl_command_raises_with_its_log(bench, tmp_path):
    harness, _ = bench
    with pytest.raises(RuntimeError, match="exit") as failed:
        harness.cli(["no-such-command"], tmp_path / "run")
    log = (tmp_path / "run.log").read_text()  # kept beside the run: the CLI itself said what was wrong
    assert "no-such-command" in log and log in str(failed.value)


def test_a_run_directory_named_relative_to_the_caller_lands_there(bench, tmp_path, monkeypatch):
    """The command runs beside the run (its cwd), so a relative ``--out`` must reach it as the caller meant it."""
    harness, _ = bench
    started = []
    popen = harness.subprocess.Popen

    def record(args, **kwargs):  # noqa: ANN001, ANN003, ANN202
        started.append((args, kwargs["cwd"]))
        return popen(["true"], **kwargs)  # no training: where the run would be written is the point

    monkeypatch.setattr(harness.subprocess, "Popen", record)
    monkeypatch.chdir(tmp_path)
    harness.train("configs/cartpole-ppo.yaml", harness.Path("runs/equal-cpu/Pong-pixel-1"))
    args, cwd = started[0]
    out = args[args.index("--out") + 1]
    assert out == str(tmp_path / "runs/equal-cpu/Pong-pixel-1") and harness.Path(cwd) == tmp_path / "runs/equal-cpu"


def test_a_run_done_again_gets_a_fresh_directory_and_the_earlier_run_stays(bench, tmp_path):
    _harness, _ = bench
    base = tmp_path / "RoadRunner-v5-real-1"
    assert _harness.fresh_dir(base) == base
    base.mkdir()
    (base / "summary.json").write_text("{}")
    assert _harness.fresh_dir(base) == tmp_path / "RoadRunner-v5-real-1-2"
    (tmp_path / "RoadRunner-v5-real-1-2").mkdir()
    assert _harness.fresh_dir(base) == tmp_path / "RoadRunner-v5-real-1-3"
    assert (base / "summary.json").read_text() == "{}"


def test_metrics_first_reaching_and_episode_returns(bench, tmp_path):
    harness, _ = bench
    rows = [{"step": 10}, {"step": 20, "episode_return": 5.0}, {"step": 30, "episode_return": 9.0}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert list(harness.metrics(tmp_path)) == rows
    assert harness.first_reaching(tmp_path, 6.0)["step"] == 30 and harness.first_reaching(tmp_path, 10.0) is None

    class Env:  # an episode of seed s lasts s % 3 + 1 steps of reward 1
        def reset(self, seed: int) -> tuple[int, dict]:
            self.left = seed % 3 + 1
            return seed, {}

        def step(self, action: int) -> tuple[int, float, bool, bool, dict]:
            self.left -= 1
            return action, 1.0, self.left == 0, False, {}

    assert harness.episode_returns(Env(), lambda obs: obs, 4, seed=10) == [2.0, 3.0, 1.0, 2.0]


def test_every_benchmark_script_ends_in_run_or_render():
    """The shared end: run and keep rows, or re-render from kept rows (``--report-only``, ``--check``)."""
    scripts = [p for p in BENCH.glob("*.py") if not p.name.startswith("_")]
    # the ledger only renders (from every results file); the equivalence check has no rows or doc section;
    # race_examples keeps what `frugalrl race` ran and renders docs/race.md, not docs/benchmarks.md
    exempt = {"ledger.py", "summary_equivalence.py", "race_examples.py"}
    missing = [p.name for p in scripts if p.name not in exempt and "_report.run_or_render(" not in p.read_text()]
    assert not missing, missing
    # one implementation of each statistic: no script defines its own median, IQM or ratio of medians
    own = [
        p.name for p in scripts if re.search(r"^def (_?median|_?iqm|ratios|_?ratio_of_medians)\(", p.read_text(), re.M)
    ]
    assert not own, own


def test_every_contender_runs_through_the_harness():
    """A fresh Python process for a contender is started in one place (``_harness.cli`` / ``worker``), so its
    CPU-seconds, log and failure message are taken the same way for every benchmark."""
    own = [
        p.name
        for p in BENCH.glob("*.py")
        if p.name not in {"_harness.py", "_report.py"} and "sys.executable" in p.read_text()
    ]
    assert not own, own


def _peft_rows(returns: dict[str, list[float]], seeds: int = 3) -> list[dict]:
    """Kept rows of a PEFT comparison on two targets: ``returns`` per contender, one per seed."""
    head = {"contest": "c1", "source_sha256": "ab" * 32, "config": "configs/x.yaml", "env_id": "X-v5",
            "source_steps": 1000, "source_return": 100.0, "source_train_flops": 1e6, "source_train_s": 100.0,
            "targets": ["heavy", "light"], "methods": [m for m in returns if m not in ("none", "scratch")],
            "contenders": list(returns), "seeds": seeds, "steps": 500, "warmup_steps": 50, "eval_episodes": 10,
            "expected_runs": 2 * len(returns) * seeds, "command": "python -m benchmarks.peft_methods",
            "batch": "b1"}  # fmt: skip
    rows = []
    for target in head["targets"]:
        for method, values in returns.items():
            for seed, value in enumerate(values[:seeds], start=1):
                flops = {"full": 1e5, "none": 0.0}.get(method, 1e4)  # 10% / 1% of the source's training
                run = {"target": target, "method": method, "seed": seed, "eval_mean": value,
                       "source_eval_mean": 100.0 if method == "none" else 90.0, "trainable": 10,
                       "trainable_share": 0.1, "critic_trainable": 10, "train_flops": flops, "train_s": 5.0,
                       "env_steps": 500, "curve": [[100, value], [200, value], [300, value]]}  # fmt: skip
                rows.append({**head, "run": run})
    return rows


def test_peft_claims_come_from_the_kept_runs_and_wait_for_a_complete_table(bench):
    from benchmarks import _peft, peft_methods

    returns = {"full": [100, 110, 120], "lora": [118, 119, 121], "adapter": [60, 70, 80], "bitfit": [100, 101, 102],
               "none": [40, 40, 40], "scratch": [10, 20, 30]}  # fmt: skip
    rows = _peft.contest_rows(_peft_rows(returns))
    measured, evidence, verdict = _peft.claim_finding(rows, "lora")
    assert verdict == "confirmed" and "108% of full" in measured and "1.00% of the source's" in measured
    assert "36 of 36 runs kept" in evidence
    assert _peft.claim_finding(rows, "adapter")[2] == (  # 64% of full at 1% of the cost: claimed 95% at 2.8%
        "refuted (the score holds on 0 of 2 targets, the cost on 2 of 2)"
    )
    measured, _, verdict = _peft.claim_finding(rows, "best")
    assert verdict == "confirmed" and "heavy: LoRA ranks 1 of 3" in measured  # [118, 121] above bitfit's [100, 102]
    close = {**returns, "bitfit": [117, 119, 122]}
    assert _peft.claim_finding(_peft.contest_rows(_peft_rows(close)), "best")[2].startswith("not separated")
    gone = {("light", "scratch", 1), ("light", "scratch", 2), ("light", "scratch", 3), ("light", "bitfit", 3)}
    partial = [r for r in _peft_rows(returns) if (r["run"]["target"], r["run"]["method"], r["run"]["seed"]) not in gone]
    partial = _peft.contest_rows(partial)
    assert _peft.claim_finding(partial, "lora")[2] == "confirmed"  # its runs and full's are complete
    assert _peft.claim_finding(partial, "bitfit")[2].startswith("not yet measured")
    assert _peft.claim_finding(partial, "best")[2].startswith("not yet measured")
    text = peft_methods.report(partial)
    assert "runs kept: 32 of 36; not yet run: light/scratch" in text
    assert "| heavy | lora | 3 | 119.0 [118.0, 121.0] | 108.2 | 112.9 | 300 |" in text


def test_peft_rows_are_kept_once_as_runs_finish_and_a_newer_source_starts_afresh(bench, tmp_path):
    from benchmarks import _peft, peft_methods
    from frugalrl.peft.table import RUN_FIELDS, write_csv

    csv_path, results = tmp_path / "peft_runs.csv", tmp_path / "rows.jsonl"
    run = {**_peft_rows({"full": [1.0]}, seeds=1)[0]["run"], "curve": "[[3, 1.0]]"}
    write_csv(csv_path, [run], RUN_FIELDS)
    kept: set = set()
    for _ in range(2):  # polled twice: kept once
        peft_methods._keep_new_runs(csv_path, kept, results, {"batch": "b"}, {"contest": "c", "source_sha256": "s"})
    rows = bench[1].read_rows(results)
    assert len(rows) == 1 and rows[0]["run"]["curve"] == [[3, 1.0]]
    newer = {**rows[0], "source_sha256": "t", "run": {**rows[0]["run"], "seed": 2}}
    assert _peft.contest_rows([*rows, newer]) == [newer]


def test_the_kept_peft_source_is_a_sac_run_of_the_comparison_s_task(bench):
    """The source in benchmarks/artifacts is what every session fine-tunes: it loads, it is a SAC run on the
    config's env with the config's network, and it passes the comparison's own bar on the unchanged task."""
    from benchmarks import peft_methods
    from frugalrl.config import load_config
    from frugalrl.peft.source import load_source

    source = load_source(str(REPO / peft_methods.SOURCE))
    config = load_config(REPO / peft_methods.CONFIG)
    assert source.config.env.id == config.env.id and source.config.policy.hidden == config.policy.hidden
    assert source.eval_mean is not None and source.eval_mean >= config.peft.min_source_return
    assert sorted(p.name for p in (REPO / peft_methods.SOURCE).iterdir()) == sorted(peft_methods.SOURCE_FILES)
    assert len(peft_methods.source_fingerprint(REPO / peft_methods.SOURCE)) == 64


def test_frozen_feature_transfer_counts_steps_to_adapt_from_the_peft_curves(bench):
    """RMT's "4-8x faster adaptation" from the PEFT runs: steps until 5 training episodes average 90% of full
    fine-tuning's median final return; the frozen torso (head_only) against full and scratch."""
    from benchmarks import _peft

    curve = [[100 * i, v] for i, v in enumerate([10, 95, 95, 95, 95, 20, 95, 95, 95, 95, 95], start=1)]
    assert _peft.steps_to_adapt(curve, 90.0) == 1100  # the first five in a row at 90, not the first four
    assert _peft.steps_to_adapt(curve[:10], 90.0) is None
    returns = {"full": [100, 100, 100], "head_only": [100, 100, 100], "scratch": [100, 100, 100],
               "none": [40, 40, 40]}  # fmt: skip
    rows = _peft_rows(returns)
    for row in rows:  # five episodes at 100 from episode `start` on: full adapts at step 500, scratch at 700
        start = {"full": 1, "scratch": 3}.get(row["run"]["method"], 99)
        row["run"]["curve"] = [[100 * i, 100.0 if i >= start else 0.0] for i in range(1, 10)]
    measured, _, verdict = _peft.transfer_finding(_peft.contest_rows(rows))
    assert "head_only not within 500 steps (0 of 3 seeds), full 500 (3 of 3 seeds), scratch 700 (3 of 3" in measured
    assert verdict == "refuted (the frozen torso never adapted within the budget; full fine-tuning and training " \
        "from scratch did)"  # fmt: skip
    for row in rows:  # now the frozen torso adapts at 500 steps, as soon as full, before scratch (700): 1.4x
        if row["run"]["method"] == "head_only":
            row["run"]["curve"] = [[100 * i, 100.0] for i in range(1, 10)]
    assert _peft.transfer_finding(_peft.contest_rows(rows))[2].startswith("partly (scratch / frozen")


def test_rmt_returns_judges_by_its_rule_and_waits_for_three_seeds_of_each(bench):
    from benchmarks import _rmt_returns

    def runs(returns: dict[str, list[float]]) -> list[dict]:
        return [{"kind": "run", "contender": c, "seed": i + 1, "budget": _rmt_returns.CONTENDERS[c][1],
                 "eval_mean": value} for c, values in returns.items() for i, value in enumerate(values)]  # fmt: skip

    base = {"ppo": [190.0, 200.0, 210.0], "sac": [220.0, 230.0, 240.0]}
    cases = [  # rmt-dqn's returns -> the verdict (half the claimed margins: 43.5 over PPO, 27 over SAC)
        ([270.0, 280.0, 290.0], "confirmed"),
        ([240.0, 240.0, 250.0], "partly"),  # above both medians, 10 over SAC's
        ([200.0, 220.0, 260.0], "refuted"),  # below SAC's median
    ]
    for rmt, expected in cases:
        measured, said = _rmt_returns.verdict(runs({"rmt-dqn": rmt, **base}))
        assert said.startswith(expected), (rmt, said)
    measured, said = _rmt_returns.verdict(runs({"rmt-dqn": [300.0], **base}))
    assert said == "not yet measured (rmt-dqn 1 of 3 seeds so far)" and "rmt-dqn 300.0" in measured
    # RMT DQN's median under PPO's, both complete: SAC's missing seeds cannot change the verdict
    measured, said = _rmt_returns.verdict(runs({"rmt-dqn": [250.0, -760.0, 100.0], "ppo": base["ppo"], "sac": [230.0]}))
    assert said == "refuted (RMT DQN's median below PPO's; sac 1 of 3 seeds so far, which cannot change it)"
    # above PPO's while SAC's seeds are missing: SAC's could still decide it
    measured, said = _rmt_returns.verdict(runs({"rmt-dqn": [250.0, 260.0, 270.0], "ppo": base["ppo"]}))
    assert said == "not yet measured (sac 0 of 3 seeds so far)"
    # a row at another budget is not this table's; a newer row of the same seed replaces the older one
    kept = runs({"ppo": [100.0]}) + [{**runs({"ppo": [150.0]})[0]}, {**runs({"ppo": [1.0]})[0], "budget": 5}]
    assert [r["eval_mean"] for r in _rmt_returns.select(kept)] == [150.0]
    probe = {"other_s_per_step": 0.001, "learn_s_per_step": 0.01, "shipped_learning_starts": 10_000}
    assert _rmt_returns.probe_hours(probe) == pytest.approx((1000 + 0.01 * 990_000) * 3 / 3600)


def test_the_pong_head_start_reads_the_curve_and_says_when_nothing_left_random_play(bench):
    from benchmarks import _head_start

    curve = [(8_192, -21.0), (40_960, -20.5), (49_152, -20.0), (57_344, -19.5), (65_536, -19.0)]
    assert _head_start.curve_figures(curve) == (-19.5, 57_344)  # early: the first row at or after 50k
    assert _head_start.curve_figures([(8_192, -21.0)]) == (None, None)
    latent_rows = [{"source": "real", "real_step": 8_192, "virtual_step": 0, "episode_return": -21.0},
                   {"source": "virtual", "real_step": 8_192, "virtual_step": 65_536, "episode_return": 3.0},
                   {"update": 3, "step": 12_288, "episode_return": -20.0}, {"update": 4, "step": 16_384}]  # fmt: skip
    assert _head_start.training_curve(latent_rows) == [(8_192, -21.0), (12_288, -20.0)]

    def runs(early: dict[str, float], reached: int | None = None) -> list[dict]:
        return [{"kind": "run", "contender": c, "seed": s, "early_score": e, "score": -20.5,
                 "steps_to_random_plus_1": reached} for c, e in early.items() for s in (1, 2, 3)]  # fmt: skip

    at_random = runs({"from-breakout": -20.6, "from-pong": -20.4, "pixel": -20.9})
    assert _head_start.verdict(at_random)[1].startswith("not measurable at this budget")
    assert _head_start.verdict(runs({"from-breakout": -15.0, "from-pong": -18.0, "pixel": -20.0}))[1].startswith(
        "partly"
    )
    assert _head_start.verdict(runs({"from-breakout": -19.0, "from-pong": -17.0, "pixel": -20.0}))[1].startswith(
        "refuted"
    )
    assert _head_start.verdict(runs({"from-breakout": 15.0, "from-pong": -17.0, "pixel": -20.0}))[1].startswith(
        "confirmed"
    )
    assert _head_start.verdict(at_random[:4])[1] == "not yet measured (from-pong 1 of 3, pixel 0 of 3 seeds so far)"
