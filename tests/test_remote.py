"""`pipeline submit` / `pipeline schedule` against a recording stand-in for the KFP API server."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
import yaml

from frugalrl.cli import main

from .conftest import REPO


class Recorder(BaseHTTPRequestHandler):
    requests: list[dict] = []
    status = 200
    page: str | None = None  # set: answer with this HTML instead (a server that is not Kubeflow)

    def do_POST(self):  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Recorder.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
        reply = {"run_id": "run-123"} if self.path.endswith("/runs") else {"recurring_run_id": "rec-9"}
        self.send_response(Recorder.status)
        self.send_header("Content-Type", "text/html" if Recorder.page else "application/json")
        self.end_headers()
        answer = json.dumps(reply if Recorder.status == 200 else {"error": "bad spec"})
        self.wfile.write((Recorder.page or answer).encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def kfp_api():
    Recorder.requests, Recorder.status, Recorder.page = [], 200, None
    server = HTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_submit_sends_the_compiled_spec_and_parameters(kfp_api, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KFP_TOKEN", "secret-token")
    package = tmp_path / "full.yaml"
    main(["pipeline", "compile", "--profile", "full", "-o", str(package)])
    main(["pipeline", "submit", "--host", kfp_api, "--package", str(package), "--name", "nightly",
          "--param", "eval_episodes=30", "--param", 'gpu_node_selector={"pool": "a100"}'])  # fmt: skip
    assert "run run-123 submitted" in capsys.readouterr().out
    (request,) = Recorder.requests
    assert request["path"] == "/apis/v2beta1/runs" and request["auth"] == "Bearer secret-token"
    body = request["body"]
    spec, platform = list(yaml.safe_load_all(package.read_text()))
    assert body["pipeline_spec"]["pipeline_spec"] == spec  # the compiled IR, unchanged
    assert body["pipeline_spec"]["platform_spec"] == platform  # node selectors and tolerations travel with it
    assert body["runtime_config"]["parameters"] == {"eval_episodes": 30, "gpu_node_selector": {"pool": "a100"}}
    assert body["display_name"] == "nightly"


def test_schedule_creates_a_recurring_run(kfp_api, tmp_path, capsys):
    main(["pipeline", "schedule", "--host", kfp_api, "--cron", "0 3 * * *", "--config",
          str(REPO / "configs/cartpole-ppo.yaml")])  # fmt: skip
    assert "recurring run rec-9 (0 0 3 * * *)" in capsys.readouterr().out
    (request,) = Recorder.requests
    assert request["path"] == "/apis/v2beta1/recurringruns"
    body = request["body"]
    assert body["trigger"] == {"cron_schedule": {"cron": "0 0 3 * * *"}}
    assert body["max_concurrency"] == "1" and body["no_catchup"] is True and body["mode"] == "ENABLE"
    assert body["pipeline_spec"]["pipelineInfo"]["name"] == "frugalrl-train"


def test_bad_cron_refused_server_errors_reported(kfp_api, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["pipeline", "schedule", "--host", kfp_api, "--cron", "every day", "--profile", "quick"])
    assert exc.value.code == 2 and "not a cron expression" in capsys.readouterr().err
    assert Recorder.requests == []  # nothing sent
    Recorder.status = 400
    with pytest.raises(SystemExit) as exc:
        main(["pipeline", "submit", "--host", kfp_api, "--profile", "quick"])
    assert exc.value.code == 2 and "answered 400" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["pipeline", "submit", "--host", "http://127.0.0.1:9", "--profile", "quick"])
    assert exc.value.code == 2 and "unreachable" in capsys.readouterr().err


HTML = (
    "<!DOCTYPE html>\n<html>\n<head><title>Welcome</title></head>\n<body>\n"
    + "<p>a dashboard</p>\n" * 10
    + "</body></html>\n"
)


@pytest.mark.parametrize("status", [200, 404])
def test_a_server_that_is_not_kubeflow_is_one_line(kfp_api, status, capsys):
    """A web page where the API should be (a dashboard, a proxy) is named in one line, not printed."""
    Recorder.status, Recorder.page = status, HTML
    with pytest.raises(SystemExit) as exc:
        main(["pipeline", "submit", "--host", kfp_api, "--profile", "quick"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.splitlines()) == 1 and "<p>" not in err
    assert ("not the KFP API" if status == 404 else "other than the KFP API") in err and "--host" in err
