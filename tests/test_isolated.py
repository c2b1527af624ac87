"""The isolated runner keeps what a stage declares and nothing else, as a cluster backend does."""

from __future__ import annotations

import json
import sys

from frugalrl.pipelines.isolated import run

STAGE = """
import json, sys
from pathlib import Path
data = json.loads(sys.argv[sys.argv.index("--executor_input") + 1])
given = Path(data["inputs"]["artifacts"]["model"]["artifacts"][0]["uri"])
out = Path(data["outputs"]["artifacts"]["table"]["artifacts"][0]["uri"])
assert given.read_text() == "weights" and "inputs" in str(given)  # a copy, in the stage's own sandbox
assert not (given.parent.parent / "neighbour.txt").exists()  # a file beside the input was not sent
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text("| a | b |")
(out.parent / "undeclared").mkdir()  # written beside a declared output: a cluster drops it
Path("scratch.txt").write_text("in the working directory")
Path(data["outputs"]["outputFile"]).write_text(json.dumps(
    {"artifacts": {"table": {"artifacts": [{"uri": str(out), "metadata": {}}]}}}))
"""


def test_a_stage_keeps_its_declared_outputs_only(tmp_path, monkeypatch):
    upstream = tmp_path / "root" / "train"
    upstream.mkdir(parents=True)
    (upstream / "model").write_text("weights")
    (upstream / "neighbour.txt").write_text("written by train, never declared")
    table = tmp_path / "root" / "compare" / "table"
    executor_input = {
        "inputs": {"artifacts": {"model": {"artifacts": [{"uri": str(upstream / "model")}]}}},
        "outputs": {"artifacts": {"table": {"artifacts": [{"uri": str(table)}]}},
                    "outputFile": str(tmp_path / "root" / "compare" / "executor_output.json")},
    }  # fmt: skip
    (tmp_path / "root" / "compare").mkdir()
    monkeypatch.chdir(tmp_path)
    code = run([sys.executable, "-c", STAGE, "--executor_input", json.dumps(executor_input)])
    assert code == 0
    assert table.read_text() == "| a | b |"  # the declared output arrived where the pipeline expects it
    assert sorted(p.name for p in table.parent.iterdir()) == ["executor_output.json", "table"]
    recorded = json.loads((table.parent / "executor_output.json").read_text())
    assert recorded["artifacts"]["table"]["artifacts"][0]["uri"] == str(table)  # the pipeline's URI, not the sandbox's
    assert not (tmp_path / "scratch.txt").exists()


def test_isolated_runs_keep_a_local_stores_artifacts_outside_the_stage_sandboxes(tmp_path, monkeypatch):
    """With a sqlite store, an experiment created inside a stage would keep its artifacts in that
    stage's deleted sandbox; the runner creates the experiments first, under the caller's mlruns."""
    from frugalrl.pipelines.local import _pin_artifact_root
    from mlflow import MlflowClient

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    _pin_artifact_root(uri, ["frugalrl", "other"])
    client = MlflowClient(tracking_uri=uri)
    for name in ("frugalrl", "other"):
        assert client.get_experiment_by_name(name).artifact_location == (tmp_path / "mlruns").as_uri()
    _pin_artifact_root(uri, ["frugalrl"])  # already there: left as it is
