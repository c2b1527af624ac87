"""The one artifact resolver: local paths, MLflow URIs on a file store, refused schemes, one-line errors."""

from __future__ import annotations

import mlflow
import pytest

from frugalrl.errors import CheckpointError, TrackingError
from frugalrl.latent.store import load_latent
from frugalrl.tracking.artifacts import resolve_artifact

FIX = "register one with `frugalrl pretrain encoder`"


def test_local_paths_are_not_fetched(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "encoder.pt").write_bytes(b"x")
    assert resolve_artifact(tmp_path / "run", "encoder.pt", "encoder", FIX) == tmp_path / "run" / "encoder.pt"
    assert resolve_artifact(str(tmp_path / "run" / "encoder.pt"), "encoder.pt", "encoder", FIX).is_file()
    assert resolve_artifact(tmp_path / "run", None, "run", FIX) == tmp_path / "run"
    missing = tmp_path / "nowhere"
    assert resolve_artifact(missing, "encoder.pt", "encoder", FIX) == missing  # the loader names what is missing
    with pytest.raises(CheckpointError, match=r"^encoder file .*nowhere not found; pretrain one with") as info:
        load_latent(missing)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("uri", ["s3://bucket/encoder.pt", "ftp://host/x", "https://example.com/encoder.pt"])
def test_unknown_scheme_is_one_line_with_the_fix(uri):
    with pytest.raises(TrackingError) as info:
        resolve_artifact(uri, "encoder.pt", "encoder", FIX)
    message = str(info.value)
    assert "\n" not in message and "unknown scheme" in message and "runs:/" in message and message.endswith(FIX)


@pytest.fixture
def file_store(tmp_path, monkeypatch):
    """A file-based MLflow tracking directory under tmp_path, with one run holding run/encoder.pt."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps file stores behind this switch
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    # A client and an experiment of its own: the fluent API's active experiment and tracking URI are
    # process-wide and other tests set them.
    mlflow.set_tracking_uri((tmp_path / "mlruns").as_uri())
    client = mlflow.MlflowClient((tmp_path / "mlruns").as_uri())
    run = client.create_run(client.create_experiment("artifacts"))
    payload = tmp_path / "payload"
    (payload / "nested").mkdir(parents=True)
    (payload / "nested" / "encoder.pt").write_bytes(b"weights")
    client.log_artifacts(run.info.run_id, str(payload), artifact_path="run")
    client.set_terminated(run.info.run_id)
    yield run.info.run_id
    mlflow.set_tracking_uri(None)  # back to MLFLOW_TRACKING_URI / the default for the tests after this one


def test_runs_uri_on_a_file_store(file_store, tmp_path):
    found = resolve_artifact(f"runs:/{file_store}/run", "encoder.pt", "encoder", FIX)
    assert found.name == "encoder.pt" and found.read_bytes() == b"weights"
    whole = resolve_artifact(f"runs:/{file_store}/run", None, "run", FIX, dest=tmp_path / "fetched")
    assert whole == tmp_path / "fetched" / "run" and (whole / "nested" / "encoder.pt").is_file()
    with pytest.raises(TrackingError, match=r"holds no evaluator.pt; register one") as info:
        resolve_artifact(f"runs:/{file_store}/run", "evaluator.pt", "evaluator", "register one")
    assert "\n" not in str(info.value)


def test_failed_fetch_is_one_line(file_store):
    uri = "runs:/0123456789abcdef0123456789abcdef/run"
    with pytest.raises(TrackingError, match=r"^cannot fetch encoder runs:/0123.* from MLflow \(.*\); check the name"):
        resolve_artifact(uri, "encoder.pt", "encoder", FIX)
    with pytest.raises(TrackingError, match=r"^run x: cannot fetch its run/ artifacts \(") as info:
        resolve_artifact(uri, None, "run", FIX, fetch_error=lambda reason: f"run x: cannot fetch its run/ artifacts "
                                                                           f"({reason[:120]})")  # fmt: skip
    assert "\n" not in str(info.value)
