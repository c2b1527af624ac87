"""The TrainJob (Kubeflow Trainer v2, the default multi-worker job): rendered from the Trainer's published
models, read back through them field by field, and refused in one line when it breaks the project's rules."""

from __future__ import annotations

import copy
import sys

import pytest
import yaml

from frugalrl.cli import main
from frugalrl.errors import ConfigError, PipelineFailed
from frugalrl.fusion import jobs, trainjob
from frugalrl.fusion.trainjob import torchrun_command, trainjob_manifest, validate_trainjob

from .conftest import REPO

IMAGE = "registry.example.com/frugalrl@sha256:" + "ab" * 32
EXAMPLE = REPO / "infra" / "training" / "trainjob.yaml"


def _job(**options) -> dict:
    pool = {"node_selector": trainjob.GPU_POOL_SELECTOR, "tolerations": trainjob.GPU_TOLERATIONS}
    return trainjob_manifest("fusion-run", "cfg", 3, IMAGE, **{**pool, **options})


def _node_pod(job: dict) -> dict:
    (patch,) = job["spec"]["runtimePatches"]
    (node,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert node["name"] == "node"  # the torch-distributed runtime's job and container
    return node["template"]["spec"]["template"]


def test_render_then_validate_round_trips_through_the_trainers_models(tmp_path, capsys):
    from kubeflow_trainer_api.models import TrainerV1alpha1TrainJob

    out = tmp_path / "job.yaml"
    main(["trainjob", "render", "--name", "fusion-run", "--workers", "3", "--gpus-per-node", "2", "--image", IMAGE,
          "--output-claim", "runs-rwx", "-o", str(out)])  # fmt: skip
    main(["trainjob", "validate", str(out)])
    assert capsys.readouterr().out.splitlines() == [f"valid TrainJob written: {out}", f"{out}: valid TrainJob"]
    job = yaml.safe_load(out.read_text())
    assert TrainerV1alpha1TrainJob.from_dict(copy.deepcopy(job)).to_dict() == job  # nothing the models drop
    assert (job["apiVersion"], job["kind"]) == ("trainer.kubeflow.org/v1alpha1", "TrainJob")
    assert job["spec"]["runtimeRef"] == {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime",
                                         "name": "torch-distributed"}  # fmt: skip
    trainer = job["spec"]["trainer"]
    assert trainer["numNodes"] == 3 and trainer["numProcPerNode"] == 2 and trainer["image"] == IMAGE
    assert trainer["resourcesPerNode"]["limits"] == {"nvidia.com/gpu": "2"}
    assert trainer["command"] == torchrun_command(["/config/config.yaml", "--out", "/runs/fusion-run"])
    by_name = {e["name"]: e for e in trainer["env"]}
    assert by_name["MLFLOW_TRACKING_URI"]["valueFrom"] == {"secretKeyRef": {"name": "frugalrl-tracking",
                                                                          "key": "MLFLOW_TRACKING_URI"}}  # fmt: skip
    assert by_name["OPTUNA_STORAGE"]["valueFrom"]["secretKeyRef"]["optional"] is True
    assert all("value" not in by_name[k] for k in trainjob.TRACKING_KEYS)  # by reference, never inlined
    pod = _node_pod(job)["spec"]
    assert pod["nodeSelector"] == trainjob.GPU_POOL_SELECTOR and pod["tolerations"] == trainjob.GPU_TOLERATIONS
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in pod["containers"][0]["volumeMounts"]}
    assert volumes[mounts["/runs"]]["persistentVolumeClaim"] == {"claimName": "runs-rwx"}  # where --out writes
    assert volumes[mounts["/config"]]["configMap"] == {"name": "frugalrl-train-config"}
    assert pod["securityContext"] == {"fsGroup": 1000} and pod["containers"][0]["securityContext"]["runAsNonRoot"]
    # the library's default output volume lives as long as the pod (the pipeline keeps the run in MLflow)
    assert {"name": "runs", "emptyDir": {}} in _node_pod(_job())["spec"]["volumes"]


def test_the_checked_in_example_is_what_render_makes_and_validates():
    job = yaml.safe_load(EXAMPLE.read_text())
    validate_trainjob(job)
    assert job == trainjob_manifest(
        "frugalrl-cartpole-fusion", "frugalrl-train-config", 4, job["spec"]["trainer"]["image"],
        node_selector=trainjob.GPU_POOL_SELECTOR, tolerations=trainjob.GPU_TOLERATIONS, output_claim="frugalrl-runs",
    )  # fmt: skip


def _spec_pod(job: dict) -> dict:
    return _node_pod(job)["spec"]


REFUSED = {
    "image by tag only": (lambda j: j["spec"]["trainer"].update(image="frugalrl:0.1.0-cuda"), "not pinned by digest"),
    "one node": (lambda j: j["spec"]["trainer"].update(numNodes=1), "spec/trainer/numNodes: 1; multi-worker"),
    "nodes left to the runtime": (lambda j: j["spec"]["trainer"].pop("numNodes"), "spec/trainer/numNodes: None"),
    "unknown field": (lambda j: j["spec"]["trainer"].update(numNode=3), "spec/trainer/numNode: unknown field"),
    "python name of a field": (lambda j: j["spec"]["trainer"].update(num_nodes=3), "trainer/num_nodes: unknown"),
    "unknown field deep down": (
        lambda j: _spec_pod(j)["volumes"][1].update(emptyDirr={}),
        "replicatedJobs/0/template/spec/template/spec/volumes/1/emptyDirr: unknown field",
    ),
    "no torchrun": (
        lambda j: j["spec"]["trainer"].update(command=["python", "-m", "frugalrl", "train", "/config/config.yaml"]),
        "spec/trainer/command: not the torchrun entry point",
    ),
    "torchrun of another program": (
        lambda j: j["spec"]["trainer"].update(command=["torchrun", "train.py"]),
        "not the torchrun entry point",
    ),
    "wrong type": (lambda j: j["spec"]["trainer"].update(numNodes="3"), "numNodes: Input should be a valid integer"),
    "not a quantity": (
        lambda j: j["spec"]["trainer"]["resourcesPerNode"]["limits"].update({"nvidia.com/gpu": [1]}),
        "limits/nvidia.com/gpu: [1] is not a float or str",
    ),
    "bad enum": (lambda j: _spec_pod(j)["tolerations"][0].update(effect="Sometimes"), "tolerations/0/effect"),
    "runtime missing": (lambda j: j["spec"].pop("runtimeRef"), "spec/runtimeRef: required, missing"),
    "name with a leading digit": (lambda j: j["metadata"].update(name="1-run"), "metadata/name '1-run'"),
    "a PyTorchJob": (lambda j: j.update(kind="PyTorchJob"), "pytorchjob validate"),
    "config map not a name": (
        lambda j: _spec_pod(j)["volumes"][0]["configMap"].update(name="Bad_Name!"),
        "volume configMap 'Bad_Name!': not a Kubernetes object name",
    ),
    "claim not a name": (
        lambda j: _spec_pod(j)["volumes"][1].update(persistentVolumeClaim={"claimName": ""}),
        "volume persistentVolumeClaim '': not a Kubernetes object name",
    ),
}


@pytest.mark.parametrize("what", REFUSED, ids=list(REFUSED))
def test_validation_refuses_in_one_line_naming_the_field(what):
    change, says = REFUSED[what]
    job = _job()
    validate_trainjob(job)
    change(job)
    with pytest.raises(ConfigError) as refused:
        validate_trainjob(job)
    assert says in str(refused.value) and "\n" not in str(refused.value), str(refused.value)


def test_building_refuses_what_validation_would():
    with pytest.raises(ConfigError, match="not pinned by digest"):
        trainjob_manifest("r", "cfg", 2, "frugalrl:0.1.0-cuda")
    with pytest.raises(ConfigError, match="2 or more workers"):
        trainjob_manifest("r", "cfg", 1, IMAGE)
    with pytest.raises(ConfigError, match="metadata/name"):
        trainjob_manifest("Not_A_Label", "cfg", 2, IMAGE)
    with pytest.raises(ConfigError, match="volume configMap 'Bad_Name!'"):
        validate_trainjob(trainjob_manifest("r", "Bad_Name!", 2, IMAGE))
    with pytest.raises(ConfigError, match="--output-claim '': name the ReadWriteMany claim"):
        trainjob_manifest("r", "cfg", 2, IMAGE, output_claim="")  # not an emptyDir that dies with the pod


def test_one_torchrun_entry_point_for_the_cluster_and_for_one_machine(monkeypatch):
    """The local launcher (``fusion.launch.torchrun``) runs the command ``torchrun_command`` builds."""
    import subprocess

    from frugalrl.fusion import launch

    seen = []
    monkeypatch.setattr(subprocess, "run", lambda command, env: seen.append(command) or subprocess.CompletedProcess(
        command, 0))  # fmt: skip
    assert launch.torchrun(["c.yaml", "--out", "o"], 2) == 0
    assert seen == [torchrun_command(["c.yaml", "--out", "o"], python=sys.executable, nproc_per_node=2,
                                     standalone=True)]  # fmt: skip
    assert trainjob.is_torchrun_entry(seen[0]) and trainjob.is_torchrun_entry(torchrun_command(["c.yaml"]))


def test_the_pipeline_stage_renders_either_kind_trainjob_by_default():
    job = jobs.distributed_manifest("TrainJob", "r", "cfg", 2, IMAGE, tolerations=trainjob.GPU_TOLERATIONS)
    legacy = jobs.distributed_manifest("PyTorchJob", "r", "cfg", 2, IMAGE, tolerations=trainjob.GPU_TOLERATIONS)
    assert (job["kind"], legacy["kind"]) == ("TrainJob", "PyTorchJob") and trainjob.KINDS[0] == "TrainJob"
    pod = legacy["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert pod["command"] == job["spec"]["trainer"]["command"]  # the same entry point
    with pytest.raises(ConfigError, match="one of TrainJob, PyTorchJob"):
        jobs.distributed_manifest("MPIJob", "r", "cfg", 2, IMAGE)


def test_the_production_dag_passes_the_job_kind_to_the_distributed_stage(tmp_path):
    from frugalrl.pipelines.local import compile_pipeline

    profile = tmp_path / "dist.yaml"
    profile.write_text(yaml.safe_dump({"name": "dist", "stages": {"train": {
        "config": "configs/cartpole-ppo.yaml", "overrides": ["distributed.workers=4", "device=cuda"],
        "model_name": "cartpole-policy"}}}))  # fmt: skip
    cpu, cuda = f"r.example.com/frugalrl@sha256:{'a' * 64}", f"r.example.com/frugalrl-cuda@sha256:{'b' * 64}"
    compile_pipeline(tmp_path / "p.yaml", profile=str(profile), image=cpu, cuda_image=cuda)
    ir = next(yaml.safe_load_all((tmp_path / "p.yaml").read_text()))
    params = ir["root"]["inputDefinitions"]["parameters"]
    assert params["training_job_kind"]["defaultValue"] == "TrainJob"
    assert params["training_image"]["defaultValue"] == cuda  # the job's GPU workers run the CUDA build
    task = ir["root"]["dag"]["tasks"]["train-distributed"]["inputs"]["parameters"]
    assert task["job_kind"]["componentInputParameter"] == "training_job_kind"
    assert task["image"]["componentInputParameter"] == "training_image"


class _Cluster:
    """The Kubernetes API as ``submit_job`` uses it: records what it creates, answers with ``conditions``."""

    def __init__(self, conditions: list[dict]):
        self.conditions, self.created = conditions, []

    def create_namespaced_config_map(self, namespace, body):
        self.created.append(("ConfigMap", namespace, body.metadata.name, body.data))

    def create_namespaced_custom_object(self, group, version, namespace, plural, body):
        self.created.append((plural, namespace, group, version))

    def get_namespaced_custom_object(self, group, version, namespace, plural, name):
        return {"status": {"conditions": self.conditions}}


@pytest.mark.parametrize("kind", ["TrainJob", "PyTorchJob"])
def test_submit_creates_the_config_and_the_job_and_follows_it(kind, monkeypatch):
    from kubernetes import client, config

    job = jobs.distributed_manifest(kind, "r", "r-config", 2, IMAGE)
    done = {"TrainJob": "Complete", "PyTorchJob": "Succeeded"}[kind]
    for conditions, failed in (([{"type": done, "status": "True"}], False), ([{"type": "Failed", "status": "True"}],
                                                                             True)):  # fmt: skip
        cluster = _Cluster(conditions)
        monkeypatch.setattr(config, "load_incluster_config", lambda: None)
        monkeypatch.setattr(client, "CoreV1Api", lambda cluster=cluster: cluster)
        monkeypatch.setattr(client, "CustomObjectsApi", lambda cluster=cluster: cluster)
        if failed:
            with pytest.raises(PipelineFailed, match=f"{kind} ns/r failed"):
                jobs.submit_job(job, "seed: 1\n", "ns", poll_s=0)
        else:
            assert jobs.submit_job(job, "seed: 1\n", "ns", poll_s=0) == "r"
        plural = {"TrainJob": "trainjobs", "PyTorchJob": "pytorchjobs"}[kind]
        assert cluster.created[0] == ("ConfigMap", "ns", "r-config", {"config.yaml": "seed: 1\n"})
        assert cluster.created[1][:2] == (plural, "ns")
