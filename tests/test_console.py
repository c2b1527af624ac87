"""What a local pipeline run prints: a line per stage, the steps' progress, the failing step's last lines."""

from __future__ import annotations

import io
import sys

from frugalrl.pipelines.console import StageConsole, stage_names
from frugalrl.pipelines.production import build_pipeline, load_profile


def test_console_shows_stages_metrics_and_progress_and_logs_everything(tmp_path):
    console = io.StringIO()
    log = tmp_path / "run.log"
    with StageConsole(log, {"train": "train policy", "evaluate": "evaluate policy"}, 2, console=console):
        print("12:00:00.000 - INFO - Executing task \x1b[96m'train'\x1b[0m")
        print('    [KFP Executor 2026 INFO]: Got executor_input:\n    {\n        "inputs": {}\n    }')
        sys.stdout.write("    step 2560/8192  sps 5630  return 26.1\n    pivot: evaluator from x")
        sys.stdout.write(": all layers transferred\n")
        print("12:00:05.000 - INFO - Task 'train' finished with status \x1b[92mSUCCESS\x1b[0m")
        print("    metrics: Metrics( name='metrics',\n        uri='/x',\n        metadata={'eval_mean': 412.25} )")
        print("    model: Model( name='model',\n        uri='/y',\n        metadata={'env_id': 'CartPole-v1'} )")
        print("12:00:06.000 - INFO - Executing task 'evaluate'")
        print("    Traceback (most recent call last):\n    ValueError: the policy file is corrupt")
        print("12:00:07.000 - ERROR - Task 'evaluate' finished with status FAILURE")
    shown = console.getvalue()
    assert "start  train policy" in shown and "done   train policy" in shown and "1 of 2 stages" in shown
    assert "step 2560/8192" in shown and "pivot: evaluator from x: all layers transferred" in shown
    assert "eval_mean 412.2" in shown and "CartPole-v1" not in shown  # metrics shown, other metadata not
    assert "executor_input" not in shown and '"inputs"' not in shown
    assert "FAILED evaluate policy" in shown and "| ValueError: the policy file is corrupt" in shown
    assert str(log) in shown
    kept = log.read_text()
    assert "Got executor_input" in kept and '"inputs": {}' in kept and "\x1b[" not in kept
    assert sys.stdout is not None and not isinstance(sys.stdout, StageConsole)


def test_a_parallel_body_reported_per_iteration_counts_once(tmp_path):
    """kfp.local ends a ParallelFor body once in some runs and once per iteration in others (seen in
    make demo: "20 of 19 stages"); the count names the stages done, not the lines."""
    console = io.StringIO()
    with StageConsole(tmp_path / "run.log", {"tune-worker": "Optuna worker", "train": "train"}, 2, console=console):
        for _ in range(2):
            print("12:00:00.000 - INFO - Executing task 'tune-worker'")
        for _ in range(2):
            print("12:00:05.000 - INFO - Task 'tune-worker' finished with status SUCCESS")
        print("12:00:06.000 - INFO - Executing task 'train'")
        print("12:00:07.000 - INFO - Task 'train' finished with status SUCCESS")
    shown = console.getvalue()
    assert shown.count("done   Optuna worker") == 2 and shown.count("; 1 of 2 stages)") == 2
    assert "; 2 of 2 stages)" in shown and "3 of 2" not in shown


def test_stage_names_are_the_display_names_and_the_count_matches_the_graph():
    names, total = stage_names(build_pipeline(load_profile("quick")))
    assert names["tune-worker"] == "Optuna worker"  # inside the ParallelFor body
    assert names["train"] == "train policy (tuned)"
    assert total == len(names) == 19
