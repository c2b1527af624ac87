"""``frugalrl race``: contenders refused before anything runs, the statistics and the decision from rows, and a
tiny race end to end (killed, then resumed without re-running a finished run)."""

from __future__ import annotations

import json
import os
import re
import runpy
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from frugalrl.cli import main
from frugalrl.errors import ConfigError
from frugalrl.race import MIN_SEEDS, parse_contenders
from frugalrl.race.runs import machine
from frugalrl.race.verdict import BETTER, CONTROL, NO_DIFFERENCE, TOO_FEW, WORSE, judge
from frugalrl.stats import probability_of_improvement

from .conftest import REPO

CARTPOLE = REPO / "configs" / "cartpole-ppo.yaml"
SAC = REPO / "configs" / "pendulum-sac.yaml"


# --------------------------------------------------------------------------- contenders
def test_builtins_become_config_changes_and_plain_resets_the_seams():
    plain, skip, pivot = parse_contenders(["plain", "random-skip", "pivot"], CARTPOLE)
    assert plain.overrides == ()  # cartpole-ppo already runs every sample with fixed hyperparameters
    assert skip.overrides == ("selection.kind=random", "selection.settings={}")
    assert pivot.overrides == ("selection.kind=pivot", "selection.settings={}")
    plain, prio = parse_contenders(["plain", "prioritized"], SAC)
    assert prio.overrides == ("replay.kind=prioritized", "replay.settings={}")
    # a config that already runs pivot: plain turns it off, pivot keeps the config's own settings
    plain, pivot = parse_contenders(["plain", "pivot"], REPO / "configs" / "cartpole-pivot.yaml")
    assert plain.overrides == ("selection.kind=all", "selection.settings={}") and pivot.overrides == ()


def test_variants_and_other_configs(tmp_path):
    _, variant, other = parse_contenders(
        ["plain", "skip50:selection.kind=random;selection.settings.keep_fraction=0.5", f"mine={CARTPOLE}"], CARTPOLE
    )
    assert variant.name == "skip50" and variant.overrides == ("selection.kind=random",
                                                              "selection.settings.keep_fraction=0.5")  # fmt: skip
    assert other.name == "mine" and other.config == CARTPOLE and other.overrides == ()


@pytest.mark.parametrize(
    ("config", "specs", "says"),
    [
        (SAC, ["plain", "random-skip"], "contender random-skip does not fit this config's learner (sac)"),
        (CARTPOLE, ["plain", "tiered"], "contender tiered does not fit this config's learner (ppo)"),
        (CARTPOLE, ["plain"], "a race needs two contenders or more"),
        (CARTPOLE, ["plain", "turbo"], "unknown contender 'turbo'"),
        (CARTPOLE, ["plain", "plain"], "contender plain is named twice"),
        (CARTPOLE, ["plain", "x:selection.kind=nonsense"], "selection.kind"),
        (CARTPOLE, ["plain", f"sac={SAC}"], "contender sac trains Pendulum-v1 and the race's config CartPole-v1"),
        (CARTPOLE, ["plain", "x=missing.yaml"], "config missing.yaml does not exist"),
        (CARTPOLE, ["plain", "random-skip:ppo.gamma=0.9"], "label 'random-skip' must be"),
    ],
)
def test_a_contender_that_does_not_fit_is_refused_in_one_line(config, specs, says):
    with pytest.raises(ConfigError) as refused:
        parse_contenders(specs, config)
    assert says in str(refused.value) and "\n" not in str(refused.value)


def test_the_command_refuses_before_writing(tmp_path, capsys):
    out = tmp_path / "race"
    with pytest.raises(SystemExit) as exit_info:
        main(["race", "--config", str(SAC), "--contenders", "plain", "random-skip", "--cpu-budget-s", "2",
              "--out", str(out)])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(err) == 1 and "does not fit" in err[0]
    assert not out.exists()


def test_a_resume_that_cannot_be_a_resume_is_refused_and_changes_nothing(tmp_path, monkeypatch, capsys):
    """Resumed from another directory (the race's config is named as it was given), or with other contenders:
    one line, exit 2, the race's files as they were."""
    out = tmp_path / "race"
    out.mkdir()
    race = {"config": "configs/cartpole-ppo.yaml", "config_sha256": "0" * 64, "sets": [], "cpu_budget_s": 2.0,
            "contenders": [{"name": "plain", "config": "configs/cartpole-ppo.yaml", "overrides": [],
                            "description": "d"}, {"name": "x", "config": "configs/cartpole-ppo.yaml",
                                                  "overrides": ["seed=3"], "description": "d"}],
            "seeds": [1], "machine": {"cpu": "?", "cpus": 1}, "pretrained": {}}  # fmt: skip
    monkeypatch.chdir(tmp_path)
    for here, argv, says in [
        (False, ["race", "--resume", str(out)], "is a race run on ? (1 CPUs), this machine is"),
        (True, ["race", "--resume", str(out)], "the race's config configs/cartpole-ppo.yaml is not found from"),
        (True, ["race", "--resume", str(out), "--contenders", "plain", "pivot"], "--resume continues a race as it"),
    ]:
        (out / "race.json").write_text(json.dumps({**race, "machine": machine()} if here else race))
        before = (out / "race.json").read_text()
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert exit_info.value.code == 2 and len(err) == 1 and says in err[0], err
        assert (out / "race.json").read_text() == before and sorted(p.name for p in out.iterdir()) == ["race.json"]


# --------------------------------------------------------------------------- statistics and the decision
def test_probability_of_improvement_counts_pairs_and_ties_half():
    assert probability_of_improvement([3, 4], [1, 2])[0] == 1.0
    assert probability_of_improvement([1, 2], [3, 4])[0] == 0.0
    assert probability_of_improvement([1, 2], [1, 2])[0] == 0.5  # (0 + 0.5 + 1 + 0.5) / 4
    point, low, high = probability_of_improvement([1, 5, 9, 2, 7], [3, 4, 6, 8, 0])
    assert point == pytest.approx(14 / 25) and 0 <= low <= point <= high <= 1


def _rows(name: str, scores: list[float], cpu_to_reach: float | None = None) -> list[dict]:
    rows = []
    for seed, score in enumerate(scores, start=1):
        curve = [[1.0, 0.0], [cpu_to_reach, 100.0]] if cpu_to_reach else [[1.0, 0.0], [5.0, 50.0]]
        rows.append({"contender": name, "seed": seed, "score": score, "train_cpu_s": 10.0, "env_steps": 1000,
                     "curve": curve})  # fmt: skip
    return rows


def test_the_decision_needs_the_paired_interval_to_exclude_zero():
    control = _rows("plain", [100, 110, 90, 105, 95], cpu_to_reach=8.0)
    rows = [*control, *_rows("up", [120, 131, 109, 124, 118], 4.0), *_rows("down", [80, 91, 70, 86, 74]),
            *_rows("same", [101, 108, 92, 104, 96], 8.0)]  # fmt: skip
    verdicts, winner, bar = judge(rows, ["plain", "up", "down", "same"])
    by = {v.name: v for v in verdicts}
    assert [by[n].verdict for n in ("plain", "up", "down", "same")] == [CONTROL, BETTER, WORSE, NO_DIFFERENCE]
    assert winner == "up" and bar == 100.0
    assert by["up"].improvement[0] > 0.9 and by["down"].improvement[0] < 0.1
    assert by["up"].cpu_to_threshold == 4.0 and by["up"].reached == 5 and by["down"].reached == 0


def test_fewer_seeds_than_the_minimum_decide_nothing():
    rows = [*_rows("plain", [100, 110, 90]), *_rows("up", [200, 210, 190])]
    verdicts, winner, _ = judge(rows, ["plain", "up"])
    assert verdicts[1].verdict == TOO_FEW and verdicts[1].paired_seeds == 3 < MIN_SEEDS and winner == "plain"
    assert np.isclose(verdicts[1].paired[0], 100.0)


def test_probability_of_improvement_is_rliables_on_the_kept_races():
    """rliable's own figures on the kept races' scores (``benchmarks/rliable_improvement.py``, run in rliable's
    venv): frugalrl's point, computed here from the same scores, is the same number."""
    path = REPO / "benchmarks" / "results" / "rliable_improvement.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert rows
    for row in rows:
        ours = probability_of_improvement(row["x"], row["y"], reps=row["reps"], seed=0)
        assert ours[0] == row["rliable_estimate"][0], row["pair"]
        assert max(abs(a - b) for a, b in zip(ours[1:], row["rliable_estimate"][1:], strict=True)) < 0.15, row["pair"]


# --------------------------------------------------------------------------- end to end
def _race(out: Path, *extra: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "frugalrl", "race", "--config", str(CARTPOLE), "--contenders", "plain",
               "random-skip", "--seeds", "1", "--cpu-budget-s", "2", "--out", str(out), *extra]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)  # fmt: skip


def test_a_killed_race_resumes_without_running_finished_runs_again(tmp_path):
    out = tmp_path / "race"
    race = _race(out)
    rows = out / "rows.jsonl"
    deadline = time.monotonic() + 120
    while not (rows.is_file() and rows.read_text().count("\n") >= 1) and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(race.pid, signal.SIGKILL)  # the race and the run it had started
    race.wait()
    first = json.loads(rows.read_text().splitlines()[0])
    kept_summary = (out / first["run"] / "summary.json").stat().st_mtime_ns

    resumed = subprocess.run([sys.executable, "-m", "frugalrl", "race", "--resume", str(out)], capture_output=True,
                             text=True, timeout=300)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    lines = rows.read_text().splitlines()
    pairs = [(r["contender"], r["seed"]) for r in map(json.loads, lines)]
    assert sorted(pairs) == [("plain", 1), ("random-skip", 1)]
    assert (out / first["run"] / "summary.json").stat().st_mtime_ns == kept_summary  # not trained again
    assert "runs kept from before" in resumed.stdout
    assert "Decision: too few seeds to decide (1 paired; a verdict needs 5)" in resumed.stdout
    decision = json.loads((out / "decision.json").read_text())
    assert decision["winner"] == "plain" and {c["verdict"] for c in decision["contenders"]} == {"control", TOO_FEW}
    # the same directory as a new race: refused, pointing at --resume; nothing there changes
    again = _race(out)
    text, _ = again.communicate(timeout=60)
    assert again.returncode == 2 and f"continue it with frugalrl race --resume {out}" in text
    assert rows.read_text().splitlines() == lines


def test_the_worked_races_on_the_page_are_what_their_kept_rows_render(monkeypatch):
    """``python -m benchmarks.race_examples --report-only --check``: docs/race.md's tables from the kept races."""
    page = (REPO / "docs" / "race.md").read_text()
    kept = {p.name for p in (REPO / "benchmarks" / "results" / "races").iterdir() if (p / "rows.jsonl").is_file()}
    assert {f"race_{name}" for name in kept} <= set(re.findall(r"<!-- BEGIN ([\w-]+) -->", page))
    monkeypatch.setattr(sys, "argv", ["race_examples.py", "--report-only", "--check"])
    try:
        runpy.run_module("benchmarks.race_examples", run_name="__main__")
    except SystemExit as exc:
        assert exc.code in (None, 0), exc.code


@pytest.mark.slow  # about a minute: 2 race runs, the decision, training, the gate and the report in kfp.local
def test_a_profile_races_then_trains_the_winner_and_reports_the_race(tmp_path, capsys):
    """A profile whose race stage puts a variant first (the control) against plain PPO, one seed: too few to
    decide, so the control wins and the training stage trains it; the report and MLflow hold the race."""
    import mlflow
    import yaml

    profile = tmp_path / "race.yaml"
    profile.write_text(yaml.safe_dump({
        "name": "race-test",
        "stages": {
            "race": {"contenders": ["slow:ppo.learning_rate=0.0002", "plain"], "seeds": 1, "cpu_budget_s": 1,
                     "parallel": 2},
            "train": {"config": "configs/cartpole-ppo.yaml", "model_name": "cartpole-race-policy",
                      "overrides": ["ppo.total_timesteps=2048", "eval.episodes=2"]},
        },
    }))  # fmt: skip
    main(["pipeline", "run", "--profile", str(profile), "--root", str(tmp_path / "runs")])
    assert "models:/cartpole-race-policy@" in capsys.readouterr().out
    run_root = next((tmp_path / "runs").glob("frugalrl-production-race-test-*"))
    trained = yaml.safe_load((run_root / "train" / "model" / "config.yaml").read_text())
    assert trained["ppo"]["learning_rate"] == 0.0002  # the winner's change reached the training stage
    report = next((tmp_path / "runs").glob("race-test-*-report.html")).read_text()
    assert "Race: which technique this branch trains" in report and "too few seeds to decide" in report
    (race,) = mlflow.search_runs(experiment_names=["frugalrl"], filter_string="tags.`frugalrl.kind` = 'race'",
                                 output_format="list")  # fmt: skip
    assert race.data.params["winner"] == "slow" and race.data.params["contenders"] == "slow,plain"
    artifacts = {a.path for a in mlflow.MlflowClient().list_artifacts(race.info.run_id, "race")}
    assert {"race/rows.jsonl", "race/table.md", "race/decision.json", "race/race.png"} <= artifacts


def test_pretraining_is_built_once_per_distinct_config(tmp_path, monkeypatch):
    """Two contenders of one config share what they need pretrained; one whose config differs gets its own
    (another evaluator, another latent size); the control needs none. The builds themselves are stand-ins."""
    from frugalrl.race import runs

    built = []

    def collect(stage, config, path):
        built.append((stage.name, config.selection.settings.get("evaluator", {}).get("hidden", "default")))

    def pretrain(stage, config, where, path):
        (where / "evaluator.pt").write_text("stand-in")

    monkeypatch.setattr(runs.pretraining, "collect", collect)
    monkeypatch.setattr(runs.pretraining, "pretrain", pretrain)
    small = "small:selection.kind=pivot;selection.settings.evaluator.hidden=[8]"
    contenders = parse_contenders(["plain", "pivot", "again:selection.kind=pivot", small], CARTPOLE)
    spec = runs.RaceSpec(CARTPOLE, tuple(contenders), (1,), 2.0)
    data = {"pretrained": {}}
    pointers = runs._pretrain_once(spec, tmp_path, data, lambda line: None)
    assert built == [("pivot", "default"), ("pivot", [8])]
    assert set(pointers) == {"pivot", "again", "small"} and pointers["pivot"] == pointers["again"] != pointers["small"]
    assert sorted(b["used_by"] for b in data["pretrained"].values()) == [["again", "pivot"], ["small"]]
