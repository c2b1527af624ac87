"""A marker password through every input that can carry a URL, against every way its service can fail:
nothing printed (stdout, stderr, logging) and nothing written holds it.

The inputs: ``MLFLOW_TRACKING_URI`` (a database and an HTTP server), ``OPTUNA_STORAGE``, ``tuning.storage``
in the config file, in ``--set`` and in a profile's stage overrides (they become a step's ``--set``; what a
compiled pipeline holds is ``test_credentials.py``'s). The failures: refused (nothing listens),
unreachable (nothing answers before the timeout), refused by the server (HTTP 401, as a wrong password
gets). Each case runs the command as a user would (``frugalrl.cli.main``, its output captured at the
file descriptors, so a library's own logging is seen too) and must end in one ``error:`` line, exit 2.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
import yaml

from frugalrl.cli import main

from .conftest import REPO, files_holding

MARK = "Mark3rPw"
REFUSED = "127.0.0.1:9"  # nothing listens on the discard port here
UNREACHABLE = "10.255.255.1:5432"  # a private address no route answers: the connection times out
CONFIG = REPO / "configs" / "cartpole-tune.yaml"
IMAGE = "registry.example:5000/frugalrl@sha256:" + "a" * 64  # compiling names an image; none is pulled
TINY = ["ppo.total_timesteps=256", "ppo.num_steps=32", "tracking.timeout_s=1"]


class _Unauthorised(BaseHTTPRequestHandler):
    """A tracking server that refuses these credentials, as one behind Basic auth does."""

    def do_GET(self):  # noqa: N802 - http.server's naming
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="mlflow"')
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def refusing_server():
    server = HTTPServer(("127.0.0.1", 0), _Unauthorised)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()


pytestmark = pytest.mark.usefixtures("forget_credentials")


def _config_with_storage(folder: Path, storage: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    data = yaml.safe_load(CONFIG.read_text())
    data["tuning"]["storage"] = storage
    path = folder / "tune.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _profile_with_storage(folder: Path, storage: str) -> Path:
    """The quick profile's CartPole branch, its tune workers' overrides naming ``storage``."""
    folder.mkdir(parents=True, exist_ok=True)
    data = yaml.safe_load((REPO / "profiles" / "quick.yaml").read_text())
    data["stages"] = {"train": data["stages"]["train"], "tune": data["stages"]["tune"]}
    data["stages"]["tune"]["overrides"] = ["tuning.trials=4", f"tuning.storage={storage}"]
    path = folder / "profile.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _cases(tmp: Path, server: str) -> dict[str, tuple[dict[str, str], list[str]]]:
    """name -> (environment, argv): each input path under each failure it can meet."""
    train = ["train", str(REPO / "configs" / "cartpole-ppo.yaml"), "--out", str(tmp / "run"), "--set",
             "tracking.enabled=true", *(a for o in TINY for a in ("--set", o))]  # fmt: skip
    tune = ["tune", "-c", str(CONFIG), "--out", str(tmp / "tune"), *(a for o in TINY for a in ("--set", o))]
    pg = f"postgresql://frugal:{MARK}@{{}}/optuna"
    return {
        "tracking database, refused": ({"MLFLOW_TRACKING_URI": f"postgresql://u:{MARK}@{REFUSED}/mlflow"}, train),
        "tracking database, unreachable": (
            {"MLFLOW_TRACKING_URI": f"postgresql://u:{MARK}@{UNREACHABLE}/mlflow"}, train),
        "tracking server, refused": ({"MLFLOW_TRACKING_URI": f"http://u:{MARK}@{REFUSED}"}, train),
        "tracking server, wrong password": ({"MLFLOW_TRACKING_URI": f"http://u:{MARK}@{server}"}, train),
        "OPTUNA_STORAGE, refused": ({"OPTUNA_STORAGE": pg.format(REFUSED)}, tune),
        "OPTUNA_STORAGE, password as a query": (
            {"OPTUNA_STORAGE": f"postgresql://frugal@{REFUSED}/optuna?password={MARK}"}, tune),
        "tuning.storage by --set, refused": ({}, [*tune, "--set", f"tuning.storage={pg.format(REFUSED)}"]),
        "tuning.storage by --set, malformed": ({}, [*tune, "--set", f"tuning.storage={{{pg.format(REFUSED)}"]),
        "tuning.storage in the config file, refused": (
            {}, ["tune", "-c", str(_config_with_storage(tmp / "inputs", pg.format(REFUSED))), "--out",
                 str(tmp / "tune-file"), *(a for o in TINY for a in ("--set", o))]),
        "tuning.storage in a profile's overrides, malformed": (
            {}, ["pipeline", "compile", "-o", str(tmp / "pipeline.yaml"), "--image", IMAGE, "--profile",
                 str(_profile_with_storage(tmp / "inputs", "{" + pg.format(REFUSED)))]),
    }  # fmt: skip


@pytest.mark.slow  # a few seconds a case: each starts the CLI's training or study
@pytest.mark.parametrize(
    "case",
    [
        "tracking database, refused",
        "tracking database, unreachable",
        "tracking server, refused",
        "tracking server, wrong password",
        "OPTUNA_STORAGE, refused",
        "OPTUNA_STORAGE, password as a query",
        "tuning.storage by --set, refused",
        "tuning.storage by --set, malformed",
        "tuning.storage in the config file, refused",
        "tuning.storage in a profile's overrides, malformed",
    ],
)
def test_a_marker_password_is_never_printed_or_written(case, tmp_path, refusing_server, capfd, monkeypatch):
    env, argv = _cases(tmp_path, refusing_server)[case]
    monkeypatch.chdir(tmp_path)
    for name in ("MLFLOW_TRACKING_URI", "OPTUNA_STORAGE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", env.get("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}"))
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    out, err = capfd.readouterr()
    assert MARK not in out + err, (out + err)[-3000:]
    assert exit_info.value.code == 2 and err.strip().splitlines()[-1].startswith("error: "), (out + err)[-3000:]
    assert "***" in out + err, (out + err)[-3000:]  # the URL is named, redacted
    assert files_holding(tmp_path, MARK) == []
