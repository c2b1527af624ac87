"""`pipeline submit` / `pipeline schedule` against a recording stand-in for the KFP API server."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
import yaml

from frugalrl.cli import main

from .conftest import CPU_IMAGE, CUDA_IMAGE, REPO

IMAGE = ("--image", CPU_IMAGE)  # compiling targets a cluster: every step names a pinned image


class Recorder(BaseHTTPRequestHandler):
    requests: list[dict] = []
    status = 200
    page: str | None = None  # set: answer with this HTML instead (a server that is not Kubeflow)
    reply: dict | None = None  # set: answer this JSON instead (an API that is not Kubeflow's)

    def do_POST(self):  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Recorder.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
        reply = {"run_id": "run-123"} if self.path.endswith("/runs") else {"recurring_run_id": "rec-9"}
        reply = Recorder.reply if Recorder.reply is not None else reply
        self.send_response(Recorder.status)
        self.send_header("Content-Type", "text/html" if Recorder.page else "application/json")
        self.end_headers()
        answer = json.dumps(reply if Recorder.status == 200 else {"error": "bad spec"})
        self.wfile.write((Recorder.page or answer).encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def kfp_api():
    Recorder.requests, Recorder.status, Recorder.page, Recorder.reply = [], 200, None, None
    server = HTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_submit_sends_the_compiled_spec_and_parameters(kfp_api, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KFP_TOKEN", "secret-token")
    package = tmp_path / "full.yaml"
    main(["pipeline", "compile", "--profile", "full", "-o", str(package), *IMAGE, "--cuda-image", CUDA_IMAGE])
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
    assert body["service_account"] == "frugalrl-pipeline"  # the identity infra/kfp/rbac.yaml grants, by default
    executors = spec["deploymentSpec"]["executors"].values()
    assert {e["container"]["image"] for e in executors} == {CPU_IMAGE, CUDA_IMAGE}
    main(["pipeline", "submit", "--host", kfp_api, "--package", str(package), "--service-account", "team-runner"])
    assert Recorder.requests[-1]["body"]["service_account"] == "team-runner"


@pytest.mark.parametrize(
    ("param", "says"),
    [
        ("training_job_kind=Bogus", "one of TrainJob, PyTorchJob"),
        ("eval_episodes=many", "an integer expected"),
        ("eval_episodes=true", "an integer expected"),
        ("gpu_node_selector=[a]", "a mapping"),
        ("eval_episode=3", "not a parameter of this pipeline; its parameters: eval_episodes, eval_seed"),
    ],
)
def test_a_parameter_the_pipeline_cannot_take_is_refused_before_sending(kfp_api, tmp_path, capsys, param, says):
    package = tmp_path / "full.yaml"
    main(["pipeline", "compile", "--profile", "full", "-o", str(package), *IMAGE, "--cuda-image", CUDA_IMAGE])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["pipeline", "submit", "--host", kfp_api, "--package", str(package), "--param", param])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.splitlines()) == 1 and says in err, err
    assert Recorder.requests == []


@pytest.mark.parametrize("command", ["submit", "schedule"])
def test_a_json_api_that_is_not_kfp_is_not_reported_as_submitted(kfp_api, tmp_path, capsys, command):
    Recorder.reply = {"status": "ok"}
    package = tmp_path / "p.yaml"
    main(["pipeline", "compile", "--config", str(REPO / "configs/cartpole-ppo.yaml"), "-o", str(package), *IMAGE])
    capsys.readouterr()
    cron = ["--cron", "0 3 * * *"] if command == "schedule" else []
    with pytest.raises(SystemExit) as exc:
        main(["pipeline", command, "--host", kfp_api, "--package", str(package), *cron])
    captured = capsys.readouterr()
    assert exc.value.code == 2 and "not the KFP v2beta1 API" in captured.err and "submitted" not in captured.out


def test_submit_compiles_with_the_images_given(kfp_api, tmp_path, capsys):
    main(["pipeline", "submit", "--host", kfp_api, "--config", str(REPO / "configs/cartpole-ppo.yaml"), *IMAGE])
    (request,) = Recorder.requests
    spec = request["body"]["pipeline_spec"]["pipeline_spec"]
    assert {e["container"]["image"] for e in spec["deploymentSpec"]["executors"].values()} == {CPU_IMAGE}
    assert request["body"]["service_account"] == "frugalrl-pipeline"


def test_submit_without_a_pinned_image_sends_nothing(kfp_api, tmp_path, capsys, monkeypatch):
    """No build recorded and no --image: one line before anything is sent; --allow-unpinned lets a local tag
    through (a dev cluster)."""
    monkeypatch.setenv("FRUGALRL_IMAGE_RECORDS", str(tmp_path / "no-records"))
    with pytest.raises(SystemExit) as exc:
        main(["pipeline", "submit", "--host", kfp_api, "--profile", "quick"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.splitlines()) == 1 and "no cpu image to name" in err
    with pytest.raises(SystemExit) as exc:
        main(["pipeline", "submit", "--host", kfp_api, "--profile", "quick", "--image", "frugalrl:dev"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.splitlines()) == 1 and "is not pinned" in err
    assert Recorder.requests == []
    main(["pipeline", "submit", "--host", kfp_api, "--profile", "quick", "--image", "frugalrl:dev", "--allow-unpinned"])
    (request,) = Recorder.requests
    spec = request["body"]["pipeline_spec"]["pipeline_spec"]
    assert {e["container"]["image"] for e in spec["deploymentSpec"]["executors"].values()} == {"frugalrl:dev"}
    assert "NOT PINNED" in spec["pipelineInfo"]["description"] and "frugalrl:dev" in spec["pipelineInfo"]["description"]


@pytest.mark.parametrize("flag", [("--image", CPU_IMAGE), ("--cuda-image", CUDA_IMAGE), ("--allow-unpinned",)])
@pytest.mark.parametrize("command", ["submit", "schedule"])
def test_a_package_takes_no_image_flags(kfp_api, tmp_path, capsys, command, flag):
    """A package is compiled already: the images it names are the ones it runs; a flag to change them is one
    line, and nothing is sent."""
    package = tmp_path / "p.yaml"
    main(["pipeline", "compile", "--config", str(REPO / "configs/cartpole-ppo.yaml"), "-o", str(package), *IMAGE])
    capsys.readouterr()
    cron = ["--cron", "0 3 * * *"] if command == "schedule" else []
    with pytest.raises(SystemExit) as exc:
        main(["pipeline", command, "--host", kfp_api, "--package", str(package), *cron, *flag])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.splitlines()) == 1
    assert "--package is compiled already" in err and flag[0] in err
    assert Recorder.requests == []


def test_schedule_creates_a_recurring_run(kfp_api, tmp_path, capsys):
    main(["pipeline", "schedule", "--host", kfp_api, "--cron", "0 3 * * *", "--config",
          str(REPO / "configs/cartpole-ppo.yaml"), *IMAGE])  # fmt: skip
    assert "recurring run rec-9 (0 0 3 * * *)" in capsys.readouterr().out
    (request,) = Recorder.requests
    assert request["path"] == "/apis/v2beta1/recurringruns"
    body = request["body"]
    assert body["trigger"] == {"cron_schedule": {"cron": "0 0 3 * * *"}}
    assert body["max_concurrency"] == "1" and body["no_catchup"] is True and body["mode"] == "ENABLE"
    spec = body["pipeline_spec"]["pipeline_spec"]  # with the platform spec (the tracking Secret) beside it
    assert spec["pipelineInfo"]["name"] == "frugalrl-train" and body["pipeline_spec"]["platform_spec"]
    assert {e["container"]["image"] for e in spec["deploymentSpec"]["executors"].values()} == {CPU_IMAGE}
    assert body["service_account"] == "frugalrl-pipeline"
    main(["pipeline", "schedule", "--host", kfp_api, "--cron", "0 3 * * *", "--profile", "quick", *IMAGE,
          "--service-account", "nightly-runner"])  # fmt: skip
    assert Recorder.requests[-1]["path"] == "/apis/v2beta1/recurringruns"
    assert Recorder.requests[-1]["body"]["service_account"] == "nightly-runner"


def test_bad_cron_refused_server_errors_reported(kfp_api, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["pipeline", "schedule", "--host", kfp_api, "--cron", "every day", "--profile", "quick", *IMAGE])
    assert exc.value.code == 2 and "not a cron expression" in capsys.readouterr().err
    assert Recorder.requests == []  # nothing sent
    Recorder.status = 400
    with pytest.raises(SystemExit) as exc:
        main(["pipeline", "submit", "--host", kfp_api, "--profile", "quick", *IMAGE])
    assert exc.value.code == 2 and "answered 400" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["pipeline", "submit", "--host", "http://127.0.0.1:9", "--profile", "quick", *IMAGE])
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
        main(["pipeline", "submit", "--host", kfp_api, "--profile", "quick", *IMAGE])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.splitlines()) == 1 and "<p>" not in err
    assert ("not the KFP API" if status == 404 else "other than the KFP API") in err and "--host" in err
