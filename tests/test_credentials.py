"""No credential in recorded data: a password in a URL of the config is redacted wherever a run
records it (MLflow params and tags, config.yaml, checkpoint.pt, policy.pt, the registered model,
compiled pipelines), the config hash is computed over the redacted config, and the real value
reaches the code that uses it by environment only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from frugalrl.cli import main
from frugalrl.config import load_config
from frugalrl.credentials import ENV_PREFIX, REDACTED, redact_data, redact_text, reveal, shown
from frugalrl.errors import ConfigError
from frugalrl.tracking import git_dirty

from .conftest import CPU_IMAGE, IN_CI, REPO, files_holding, needs_postgres, tiny_config

SECRET = "s3cretpw"
STORAGE = f"postgresql://postgres:{SECRET}@127.0.0.1:5432/test"  # trust auth here: any password connects
TINY = ["ppo.total_timesteps=512", "ppo.num_steps=32", "env.num_envs=4", "eval.episodes=2"]
TUNE_BUDGET = ["ppo.total_timesteps=1024", "ppo.num_steps=32", "eval.episodes=2", "tuning.report_every_updates=1"]


pytestmark = pytest.mark.usefixtures("forget_credentials")


def _holding(root: Path) -> list[str]:
    return files_holding(root, SECRET)


@pytest.mark.parametrize(
    ("text", "shown_as"),
    [
        (STORAGE, f"postgresql://postgres:{REDACTED}@127.0.0.1:5432/test"),
        ("postgresql+psycopg://u:p:a:ss@db:5432/x", f"postgresql+psycopg://u:{REDACTED}@db:5432/x"),
        ("s3://bucket/k?X-Amz-Signature=abc123&part=1", f"s3://bucket/k?X-Amz-Signature={REDACTED}&part=1"),
        ("https://host/api?token=t0k&x=1", f"https://host/api?token={REDACTED}&x=1"),
        (
            "storage: mysql://root:pw@localhost/optuna  # tuning\n",
            f"storage: mysql://root:{REDACTED}@localhost/optuna  # tuning\n",
        ),
    ],
)
def test_credentials_are_replaced_and_remembered_for_this_process(text, shown_as):
    assert redact_text(text) == shown_as == shown(text)
    for url in [u for u in text.split() if "://" in u]:
        assert reveal(redact_text(url), "the url") == url  # the real value, from this process's environment


@pytest.mark.parametrize("text", ["models:/cartpole-policy@champion", "http://127.0.0.1:5000", "sqlite:///a/b.db",
                                  "postgresql://postgres@127.0.0.1:5432/test", "runs:/abc/policy"])  # fmt: skip
def test_text_without_credentials_is_unchanged(text):
    assert redact_text(text) == text and reveal(text, "x") == text


def test_secret_named_keys_are_redacted_whatever_their_value():
    data = {"storage": {"password": "hunter2", "aws_secret_access_key": "AKIA", "user": "me"}}
    assert redact_data(data) == {"storage": {"password": REDACTED, "aws_secret_access_key": REDACTED, "user": "me"}}


def test_shipped_configs_and_profiles_hold_no_credential_so_they_keep_their_hashes():
    for path in [*(REPO / "configs").glob("*.yaml"), *(REPO / "profiles").glob("*.yaml")]:
        data = yaml.safe_load(path.read_text())
        assert redact_data(data) == data, path


def test_the_hash_is_over_the_redacted_config():
    with_secret = load_config(REPO / "configs" / "cartpole-ppo.yaml", [f"tuning.storage={STORAGE}"])
    other_password = load_config(
        REPO / "configs" / "cartpole-ppo.yaml", [f"tuning.storage={STORAGE.replace(SECRET, 'x')}"]
    )
    assert SECRET not in with_secret.to_yaml() and SECRET not in str(with_secret.to_dict())
    assert with_secret.tuning.storage == shown(STORAGE)
    assert with_secret.hash() == other_password.hash()


def test_a_redacted_storage_without_its_secret_names_the_variable_to_set(monkeypatch):
    monkeypatch.delenv("OPTUNA_STORAGE", raising=False)
    with pytest.raises(ConfigError, match="set OPTUNA_STORAGE to the full URL") as info:
        reveal(shown(STORAGE), "tuning.storage", "OPTUNA_STORAGE")
    assert SECRET not in str(info.value) and "\n" not in str(info.value)
    monkeypatch.setenv("OPTUNA_STORAGE", STORAGE)
    assert reveal(shown(STORAGE), "tuning.storage", "OPTUNA_STORAGE") == STORAGE


@pytest.mark.slow  # 15 s: a tracked training run, then its resume in a fresh process
def test_a_tracked_run_holds_the_secret_nowhere_and_resumes_without_it(tmp_path):
    """``frugalrl train`` with a password in ``tuning.storage`` (a documented key), tracked in MLflow:
    the store, the artifacts, config.yaml, checkpoint.pt and policy.pt hold no trace of it; the run
    resumes in a process that never saw it, with the same config hash."""
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(tiny_config().to_dict()))
    sets = [a for o in [*TINY, "tracking.enabled=true", "checkpoint.every_updates=1", f"tuning.storage={STORAGE}"]
            for a in ("--set", o)]  # fmt: skip
    main(["train", str(config), "--out", str(tmp_path / "run"), *sets])
    assert (tmp_path / "run" / "checkpoint.pt").is_file() and (tmp_path / "mlflow.db").is_file()
    assert _holding(tmp_path) == []
    assert shown(STORAGE) in (tmp_path / "run" / "config.yaml").read_text()

    summary = (tmp_path / "run" / "summary.json").read_text()
    (tmp_path / "run" / "summary.json").unlink()  # as if killed after its last checkpoint
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    env["MLFLOW_TRACKING_URI"] = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = subprocess.run([sys.executable, "-m", "frugalrl.cli", "train", "--resume", str(tmp_path / "run")],
                          capture_output=True, text=True, env=env, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]

    assert (
        json.loads((tmp_path / "run" / "summary.json").read_text())["config_hash"] == json.loads(summary)["config_hash"]
    )
    assert _holding(tmp_path) == []


def _tuned_profile(tmp_path: Path, study_overrides: list[str]) -> Path:
    """A profile and its config file, both holding the password, in ``tmp_path/inputs``."""
    (tmp_path / "inputs").mkdir()
    config = tmp_path / "inputs" / "tune.yaml"
    text = (REPO / "configs" / "cartpole-tune.yaml").read_text()
    config.write_text(text + f"# the study's storage, as a user might write it:\n# storage: {STORAGE}\n")
    profile = {
        "name": "secret",
        "stages": {
            "train": {"config": str(config), "model_name": "cartpole-policy",
                      "overrides": [*TUNE_BUDGET, *study_overrides]},
            "tune": {"workers": 1, "overrides": ["tuning.trials=2"]},
        },
    }  # fmt: skip
    path = tmp_path / "inputs" / "profile.yaml"
    path.write_text(yaml.safe_dump(profile))
    assert SECRET in config.read_text() and SECRET in path.read_text()
    return path


def test_a_compiled_pipeline_holds_no_credential(tmp_path):
    profile = _tuned_profile(tmp_path, [f"tuning.storage={STORAGE}"])
    main(
        ["pipeline", "compile", "--profile", str(profile), "-o", str(tmp_path / "out" / "p.yaml"), "--image", CPU_IMAGE]
    )
    compiled = (tmp_path / "out" / "p.yaml").read_text()
    assert SECRET not in compiled and shown(STORAGE) in compiled and CPU_IMAGE in compiled


@pytest.mark.slow  # a minute: a tuned production DAG (tune, train, evaluate, register) at a tiny budget
@needs_postgres
def test_a_tuned_pipeline_and_its_registered_model_hold_the_secret_nowhere(tmp_path, monkeypatch, capsys):
    """The tune workers reach the study through the redacted URL (the real one by environment),
    the registered model and every file of the run hold no trace of the password."""
    monkeypatch.delenv("OPTUNA_STORAGE", raising=False)
    study = f"secret-{uuid.uuid4().hex[:8]}"
    profile = _tuned_profile(tmp_path, [f"tuning.storage={STORAGE}", f"tuning.study_name={study}"])
    main(["pipeline", "run", "--profile", str(profile), "--root", str(tmp_path / "runs")])
    out = capsys.readouterr().out
    assert "cartpole-policy" in out

    import optuna
    from mlflow import MlflowClient

    studies = optuna.get_all_study_names(storage=STORAGE)
    assert any(name.startswith(study) for name in studies)  # the workers used the configured storage
    client = MlflowClient()
    version = client.get_latest_versions("cartpole-policy")[0]
    local = Path(client.download_artifacts(version.run_id, "", str(tmp_path / "downloaded")))
    assert any(local.rglob("*.pt"))  # the registered model's files are among those scanned
    assert _holding(tmp_path) == []


@pytest.mark.slow  # an audit: the run re-run on its recorded commit
@pytest.mark.skipif(
    not IN_CI and git_dirty(),
    reason="the checkout has uncommitted changes: runs from it cannot be audited (in CI this test runs)",
)
def test_an_audit_of_a_run_made_with_a_secret_reproduces_without_it(tmp_path, monkeypatch):
    import mlflow

    from frugalrl.ops.audit import audit
    from frugalrl.tracking import check_tracking
    from frugalrl.training import train

    mlflow.set_tracking_uri(check_tracking())
    config = load_config(REPO / "configs" / "cartpole-ppo.yaml", [*TINY, "ppo.batch_size=64", "tracking.enabled=true",
                                                                  f"tuning.storage={STORAGE}"])  # fmt: skip
    summary = train(config, tmp_path / "run", interactive=False)
    for name in [n for n in os.environ if n.startswith(ENV_PREFIX)]:  # the audit never saw the secret
        monkeypatch.delenv(name)
    result = audit(summary["mlflow_run_id"], keep=tmp_path / "audit")
    assert result["reproduced"], result["differences"]
    assert _holding(tmp_path) == []


@pytest.mark.parametrize(
    "override",
    [f"tuning.storage={{{STORAGE}", STORAGE],  # a value that does not parse; an override with no '='
)
def test_a_malformed_override_is_refused_without_echoing_its_password(override, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["config", "validate", str(REPO / "configs/cartpole-tune.yaml"), "--set", override])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert SECRET not in err and shown(STORAGE) in err and err.count("\n") == 1


def test_a_password_in_a_rejected_option_value_is_not_echoed(capsys):
    """The CLI's last guard: whatever a message quotes from the command line, its credentials are hidden."""
    for argv in (["pipeline", "run", "--profile", "quick", "--runner", STORAGE], ["config", "validate", STORAGE]):
        with pytest.raises(SystemExit) as exit_info:  # a choice it is not; a file it is not (pathlib keeps one "/")
            main(argv)
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert SECRET not in err and ":***@127.0.0.1" in err and err.count("\n") == 1, err
