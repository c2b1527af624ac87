"""The compiled production DAG, executed as a Kubeflow cluster executes it (``tests/cluster_executor.py``).

The profile is ``quick``'s stages at a test budget (every branch: evaluator, Optuna workers, tuned
training; encoder and curriculum; PEFT source and comparison), compiled for a cluster after
``frugalrl image push`` (the compile names the pushed digest in every step). Each step runs in its
own container with only the IR's environment and the Secret ``frugalrl-tracking`` (a local stand-in
for the cluster's), on a Docker network where MLflow (a server run from the step image, proxying
artifacts, on this machine's PostgreSQL) answers as ``mlflow`` and PostgreSQL as ``postgres``. Then
the profile's CartPole branch, compiled alone, runs again with a new seed, as a recurring run would: its
evaluator steps come from the cache, and its gate compares the new challenger with the first run's
champion, read from the server. (The branch alone, not the whole DAG again: the other branches' second
run would check nothing new and cost two more minutes of CI.)
"""

from __future__ import annotations

import copy
import json
import urllib.request
import uuid

import pytest
import yaml
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from frugalrl.cli import main
from frugalrl.ops.images import ImageRecord, daemon_available
from frugalrl.ops.profiles import cpu_cores, memory_bytes
from frugalrl.policy_store import load_policy

from .cluster_executor import (
    ClusterStandIn,
    docker_network,
    load_ir,
    mlflow_service,
    run_compiled,
    step_stores,
    tcp_forward,
)
from .conftest import IN_CI, REPO, _admin, needs_postgres
from .test_mlflow_server import TEST_PROFILE

# The quick profile's resources (a step asks for no more than this machine's 2 cores), its stages at the
# server test's budgets, but a CartPole policy trained long enough to beat the random policy every time:
# the first run must leave a champion for the second run's gate to face.
CLUSTER_PROFILE = copy.deepcopy(TEST_PROFILE)
CLUSTER_PROFILE["name"] = "cluster"
CLUSTER_PROFILE["resources"] = yaml.safe_load((REPO / "profiles" / "quick.yaml").read_text())["resources"]
CLUSTER_PROFILE["stages"]["train"]["overrides"] = [
    o for o in TEST_PROFILE["stages"]["train"]["overrides"] if not o.startswith(("ppo.total_timesteps", "name="))
] + ["ppo.total_timesteps=12288", "name=cluster-test"]
# Its Optuna trials only have to run (and share their study in PostgreSQL): a small budget each.
CLUSTER_PROFILE["stages"]["tune"]["overrides"] = ["tuning.trials=2", "ppo.total_timesteps=2048"]
# The recurring run: the profile's CartPole branch (the same train and tune stages, compiled alone), so its
# evaluator steps are the first run's by cache key and its gate faces the first run's champion.
SCHEDULED_PROFILE = {**CLUSTER_PROFILE, "stages": {k: CLUSTER_PROFILE["stages"][k] for k in ("train", "tune")}}
POLICY = "cartpole-policy"


def _push(registry: str, records, capsys) -> str:  # noqa: ANN001 - the records fixture's folder
    """``frugalrl image push``: the registry serves the digest, the checkout's record names it; the pinned reference."""
    main(["image", "push", "--registry", registry])
    record = ImageRecord(**json.loads((records / "image-cpu.json").read_text()))
    pinned = f"{registry}/frugalrl@{record.digest}"
    assert record.repository == f"{registry}/frugalrl" and capsys.readouterr().out.strip().endswith(f"pushed: {pinned}")
    accept = {"Accept": "application/vnd.docker.distribution.manifest.v2+json"}
    head = urllib.request.Request(f"http://{registry}/v2/frugalrl/manifests/{record.digest}", method="HEAD",
                                  headers=accept)  # fmt: skip
    assert urllib.request.urlopen(head, timeout=10).status == 200
    return pinned


@pytest.mark.slow
@needs_postgres
def test_the_compiled_pipeline_runs_as_a_cluster_runs_it_then_again_as_a_schedule(tmp_path, request, capsys):
    if not IN_CI and not daemon_available():
        pytest.skip("no Docker daemon answers (start dockerd; .ci/run does): each step runs in a container")
    request.getfixturevalue("step_image")
    image = _push(request.getfixturevalue("registry"), request.getfixturevalue("records"), capsys)
    profile = tmp_path / "cluster.yaml"
    profile.write_text(yaml.safe_dump(CLUSTER_PROFILE))
    package = tmp_path / "pipeline.yaml"
    main(["pipeline", "compile", "--profile", str(profile), "-o", str(package)])  # the image: the last push
    assert f"image: {image} (from the last cpu build" in capsys.readouterr().out
    scheduled = tmp_path / "scheduled.yaml"
    (tmp_path / "scheduled-profile.yaml").write_text(yaml.safe_dump(SCHEDULED_PROFILE))
    main(["pipeline", "compile", "--profile", str(tmp_path / "scheduled-profile.yaml"), "-o", str(scheduled)])
    capsys.readouterr()
    spec, platform = load_ir(package)
    for name, executor in spec.deployment_spec["executors"].items():  # what a 2-core node can schedule
        container = executor["container"]
        assert cpu_cores(container["resources"]["resourceCpuRequest"]) <= 2, name
        assert memory_bytes(container["resources"]["resourceMemoryLimit"]), name
        assert container["image"] == image, name
        assert {"name": "FRUGALRL_IMAGE_DIGEST", "value": image.partition("@")[2]} in container["env"], name

    database, study = f"mlflow_{uuid.uuid4().hex[:10]}", f"optuna_{uuid.uuid4().hex[:10]}"
    _admin(f"CREATE DATABASE {database}")
    _admin(f"CREATE DATABASE {study}")
    root = tmp_path / "artifacts"
    root.mkdir()
    root.chmod(0o2777)  # the steps run as the image's user; the volume is theirs, as a pod's emptyDir would be
    try:
        with docker_network() as (network, gateway), tcp_forward(gateway, 5432) as pg_port:
            hosts = {"postgres": gateway}
            backend = f"postgresql+psycopg://postgres@postgres:{pg_port}"
            with mlflow_service(image, network, f"{backend}/{database}", hosts) as url:
                cluster = ClusterStandIn(network, root, hosts=hosts, secrets={"frugalrl-tracking": {
                    "MLFLOW_TRACKING_URI": "http://mlflow:5000", "OPTUNA_STORAGE": f"{backend}/{study}",
                }})  # fmt: skip
                run_compiled(package, cluster, {"eval_episodes": 10})
                _check_the_first_run(url, cluster, image)
                first = len(cluster.executed)
                run_compiled(scheduled, cluster, {"eval_episodes": 10, "seed": 2})  # as a recurring run would
                _check_the_scheduled_run(url, cluster, first)
    finally:
        _admin(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        _admin(f"DROP DATABASE IF EXISTS {study} WITH (FORCE)")


def _check_the_first_run(url: str, cluster: ClusterStandIn, image: str) -> None:
    assert len(cluster.executed) == 19, [e["executor"] for e in cluster.executed]
    for step in cluster.executed:  # the IR's environment, the Secret's keys and the launcher's; nothing of the host
        assert "MLFLOW_TRACKING_URI" in step["env"] and "FRUGALRL_TRACKING_SECRET" in step["env"], step
        assert not {"HOME", "PATH", "PYTHONPATH", "FRUGALRL_CI", "VIRTUAL_ENV"} & set(step["env"]), step
        assert step["limits"]["nano_cpus"] <= 2e9 and step["limits"]["mem_limit"] > 0 and step["deadline_s"]
    tuners = [s for s in cluster.executed if s["executor"].startswith("exec-tune")]
    assert tuners and all("OPTUNA_STORAGE" in s["env"] for s in tuners)
    assert step_stores(cluster.root) == []  # no step kept a tracking or Optuna store of its own

    client = MlflowClient(tracking_uri=url)
    for name in ("cartpole-evaluator", "breakout-encoder"):
        assert client.get_model_version_by_alias(name, "champion").version == "1", name
    champion = client.get_model_version_by_alias(POLICY, "champion")
    assert champion.version == "1" and "first model beats the random policy" in champion.tags["frugalrl.promotion"]
    assert len(json.loads(champion.tags["frugalrl.eval_returns"])) == 10
    run = client.get_run(champion.run_id)
    assert run.data.tags["frugalrl.image"] == image  # the run records the pinned image it ran in
    assert run.data.tags["frugalrl.image_digest"] == image.partition("@")[2]
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id, "run")}
    assert {"run/summary.json", "run/config.yaml", "run/policy.pt"} <= artifacts  # through the server's proxy
    for name in ("breakout-policy", "pendulum-policy", "pendulum-policy-adapted"):
        assert client.get_model_version(name, "1").tags["frugalrl.promotion"], name
    trials = client.search_runs([run.info.experiment_id], "tags.mlflow.parentRunId != ''")
    assert len(trials) >= 2  # one nested MLflow run per Optuna trial, the study in PostgreSQL
    # the other branches' lineage: which encoder the curriculum used, which source PEFT adapted
    latent = client.get_run(client.get_model_version("breakout-policy", "1").run_id)
    assert latent.data.tags["frugalrl.lineage.encoder"].startswith("models:/")
    adapted = client.get_model_version("pendulum-policy-adapted", "1")
    assert adapted.tags["frugalrl.peft.method"] in ("lora", "bitfit", "none")  # none: no method beat the source
    assert adapted.tags["frugalrl.lineage.peft_source"].startswith("models:/")
    with pytest.MonkeyPatch.context() as patch:  # a model a step registered loads here, through the server's proxy
        patch.setenv("MLFLOW_TRACKING_URI", url)
        assert load_policy("models:/pendulum-policy-adapted/1").spec["env"]["id"] == "InvertedPendulum-v5"
    (report,) = cluster.root.rglob("report/html")
    assert "<h3>PEFT comparison</h3>" in report.read_text()  # the comparison's table, a declared artifact, arrived


def _check_the_scheduled_run(url: str, cluster: ClusterStandIn, first: int) -> None:
    again = [s["executor"] for s in cluster.executed[first:]]
    # collection and pretraining are cached (same config text, same inputs); training, evaluation and promotion never
    assert not any(e.startswith(("exec-collect", "exec-pretrain")) for e in again), again
    assert sum(e.startswith("exec-register") for e in again) == 1 and "exec-report" in again
    client = MlflowClient(tracking_uri=url)
    newest = client.get_model_version(POLICY, "2")
    decision = newest.tags["frugalrl.promotion"]
    assert "first model" not in decision, decision  # judged against version 1, the champion on the server
    promoted = client.get_run(newest.run_id).data.tags["frugalrl.promoted"] == "true"
    print(f"scheduled run: {POLICY} version 2 {'promoted' if promoted else 'kept as challenger'}: {decision}")
    assert client.get_model_version_by_alias(POLICY, "champion").version == ("2" if promoted else "1"), decision
    assert client.get_run(newest.run_id).data.params["seed"] == "2"
    with pytest.raises(MlflowException):  # the first run's model stays where it was: version 1 is not replaced
        client.get_model_version(POLICY, "3")
    reports = sorted(cluster.root.rglob("report/html"), key=lambda p: p.stat().st_mtime)
    page = reports[-1].read_text()  # the report says which won: this run's version and the champion now
    verdict = "promoted to <strong>champion</strong>" if promoted else "kept as <strong>challenger</strong>"
    assert f"{POLICY} version 2" in page and verdict in page, page[:3000]
