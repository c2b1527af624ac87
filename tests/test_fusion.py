"""Gradient fusion: equal to a dense all-reduce at k=1, error feedback loses nothing, dead workers fail fast."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from frugalrl.config import DistributedConfig
from frugalrl.fusion import Layout, decode, encode, make_reducer

from .conftest import REPO


def test_error_feedback_conserves_the_gradient_mass():
    """Over steps, what was sent plus what is still held back equals the sum of the raw gradients."""
    torch.manual_seed(0)
    shapes = [(64, 4), (40_000,), (3,)]
    layout = Layout.for_tensors([int(torch.tensor(s).prod()) for s in shapes], 0.05, torch.float16)
    residuals = [torch.zeros(layout.numels[i]) for i in range(len(shapes))]
    raw_sum = [torch.zeros(n) for n in layout.numels]
    sent_sum = [torch.zeros(n) for n in layout.numels]
    for _ in range(20):
        grads = [torch.randn(s) for s in shapes]
        buffer = encode(grads, residuals, layout)
        assert buffer.numel() == layout.nbytes  # the counted bytes are the buffer's
        for i, (g, sent) in enumerate(zip(grads, decode(buffer, layout), strict=True)):
            raw_sum[i] += g.reshape(-1)
            sent_sum[i] += sent
    for raw, sent, residual in zip(raw_sum, sent_sum, residuals, strict=True):
        torch.testing.assert_close(sent + residual, raw, rtol=0, atol=1e-4)
    assert layout.index_dtypes == (torch.int16, torch.int32, torch.int16)  # int16 where the tensor is small


def _worker(rank: int, world: int, port: int, results: dict) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(rank)
    params = [torch.nn.Parameter(torch.zeros(s)) for s in [(8, 5), (5,), (300,)]]
    grads = [torch.randn(p.shape) for p in params]
    out = {}
    for mode in ("dense", "topk"):
        config = DistributedConfig(kind=mode, settings={"share": 1.0} if mode == "topk" else {}, beta=0.0,
                                   value_dtype="float32")  # fmt: skip
        for p, g in zip(params, grads, strict=True):
            p.grad = g.clone()
        fusion = make_reducer(config, world)
        fusion.synchronize(params)
        out[mode] = [p.grad.clone() for p in params]
        out[f"{mode}_bytes"] = (fusion.bytes_sent, fusion.dense_bytes)
        out[f"{mode}_wire"] = (fusion.wire_bytes, fusion.element_ops, sum(fusion.seconds.values()))
    results[rank] = out
    dist.destroy_process_group()


def test_topk_with_k_1_and_beta_0_equals_dense_all_reduce():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    results = mp.Manager().dict()
    mp.spawn(_worker, args=(2, port, results), nprocs=2, join=True)
    for rank in (0, 1):
        for dense, topk in zip(results[rank]["dense"], results[rank]["topk"], strict=True):
            torch.testing.assert_close(topk, dense, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(results[0]["topk"][2], results[1]["topk"][2])  # the same gradient everywhere
    sent, dense = results[0]["topk_bytes"]
    assert sent == 345 * (4 + 2) and dense == 345 * 4  # k=1 sends every value plus an int16 index
    # On the wire (ring algorithms): all_reduce 2(W-1)/W x the payload, all_gather (W-1) x each worker's.
    dense_wire, dense_ops, dense_s = results[0]["dense_wire"]
    topk_wire, topk_ops, topk_s = results[0]["topk_wire"]
    assert dense_wire == 2 * (2 - 1) / 2 * 345 * 4 and topk_wire == (2 - 1) * 345 * 6
    assert dense_ops > 0 and topk_ops > dense_ops and dense_s > 0 and topk_s > 0  # encode/decode counted and timed


def _train(tmp_path, *extra: str, timeout: float = 600) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "frugalrl.cli",
        "train",
        str(REPO / "configs/cartpole-ppo.yaml"),
        "--workers",
        "2",
        "--out",
        str(tmp_path / "run"),
        "--set",
        "tracking.enabled=false",
        "--set",
        "eval.episodes=3",
        *extra,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)  # fmt: skip


@pytest.mark.slow
def test_two_gloo_workers_train_and_report_bytes(tmp_path):
    proc = _train(tmp_path, "--set", "ppo.total_timesteps=2048")
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["workers"] == 2 and "gradient_fusion" in summary["techniques"]
    assert summary["bytes_sent"] > 0 and summary["dense_equivalent_bytes"] > 4 * summary["bytes_sent"]
    assert summary["wire_bytes_per_worker"] == summary["bytes_sent"]  # all_gather of 2 workers: (2 - 1) x payload
    assert summary["flops_by_phase"]["gradient_sync"]["flops"] > 0 and summary["fusion_encode_s"] > 0
    assert summary["real_env_steps_all_workers"] == 2 * summary["real_env_steps"] == 4096
    assert not (tmp_path / "run" / "rank1" / "checkpoint.pt").exists()  # rank 0 alone checkpoints


@pytest.mark.slow
def test_a_killed_worker_fails_the_job_within_the_timeout(tmp_path):
    cmd = [sys.executable, "-m", "frugalrl.cli", "train", str(REPO / "configs/cartpole-ppo.yaml"), "--workers", "2",
           "--out", str(tmp_path / "run"), "--set", "tracking.enabled=false", "--set", "distributed.timeout_s=20",
           "--set", "ppo.total_timesteps=10000000"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    victim = None
    while victim is None and time.time() < deadline:
        time.sleep(1)
        ps = subprocess.run(["pgrep", "-f", "m frugalrl train"], capture_output=True, text=True).stdout.split()
        workers = [int(pid) for pid in ps if _is_worker(int(pid), tmp_path)]
        if len(workers) >= 2 and (tmp_path / "run" / "metrics.jsonl").exists():
            victim = max(workers)
    assert victim is not None, "the workers did not start"
    killed_at = time.time()
    os.kill(victim, signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert time.time() - killed_at < 60
    assert "a training worker failed" in err


def _is_worker(pid: int, run_dir: Path) -> bool:
    """A torchrun worker of this test's run (its --out is under ``run_dir``): never another test's process, which
    may be training beside it (pytest-xdist) with the same command line."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as env, open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return b"LOCAL_RANK=" in env.read() and str(run_dir).encode() in cmdline.read()
    except OSError:
        return False


def test_train_on_workers_passes_the_overrides_to_torchrun_and_returns_rank_0s_summary(tmp_path, monkeypatch):
    """The launch without its processes: torchrun's argv, the summary read back, a failed worker one line."""
    from frugalrl.errors import FrugalError
    from frugalrl.fusion import launch

    calls = []
    monkeypatch.setattr(launch, "torchrun", lambda argv, workers: calls.append((argv, workers)) or 0)
    (tmp_path / "summary.json").write_text(json.dumps({"workers": 3, "eval_mean": 1.5}))
    summary = launch.train_on_workers(REPO / "c.yaml", tmp_path, ["a=1", "distributed.workers=3"], 3)
    assert summary == {"workers": 3, "eval_mean": 1.5}
    assert calls == [([str(REPO / "c.yaml"), "--out", str(tmp_path), "--set", "a=1", "--set", "distributed.workers=3"],
                      3)]  # fmt: skip

    monkeypatch.setattr(launch, "torchrun", lambda argv, workers: 1)
    with pytest.raises(FrugalError, match=r"^a training worker failed \(exit code 1\); its log above says why$"):
        launch.train_on_workers(REPO / "c.yaml", tmp_path / "elsewhere", [], 2)


def test_distributed_config_refuses_what_cannot_run_on_workers():
    from frugalrl.config import load_config
    from frugalrl.errors import ConfigError

    with pytest.raises(ConfigError, match="sample selection"):
        load_config(REPO / "configs/cartpole-pivot.yaml", ["distributed.workers=2"])
    with pytest.raises(ConfigError, match="target_kl"):
        load_config(REPO / "configs/cartpole-ppo.yaml", ["distributed.workers=2", "ppo.target_kl=0.02"])


def test_pytorchjob_manifest_validates_and_bad_ones_are_named():
    import copy

    from frugalrl.errors import ConfigError
    from frugalrl.fusion.pytorchjob import pytorchjob_manifest, validate_manifest
    from frugalrl.fusion.trainjob import is_torchrun_entry

    toleration = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    job = pytorchjob_manifest("fusion-run", "cfg", 3, "frugalrl:0.1.0-cuda", node_selector={"pool": "gpu"},
                              tolerations=toleration)  # fmt: skip
    validate_manifest(job)
    specs = job["spec"]["pytorchReplicaSpecs"]
    assert specs["Master"]["replicas"] == 1 and specs["Worker"]["replicas"] == 2
    pod = specs["Worker"]["template"]["spec"]
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert pod["tolerations"] == toleration and pod["nodeSelector"] == {"pool": "gpu"}
    assert pod["containers"][0]["envFrom"] == [{"secretRef": {"name": "frugalrl-tracking"}}]
    # the same entry point as the TrainJob: torchrun, its rendezvous from the operator's PET_* variables
    assert pod["containers"][0]["command"][:3] == ["torchrun", "--max-restarts=0", "-m"]
    assert is_torchrun_entry(pod["containers"][0]["command"]) and job["spec"]["nprocPerNode"] == "1"
    bad = copy.deepcopy(job)
    bad["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = "Sometimes"
    with pytest.raises(ConfigError, match="restartPolicy"):
        validate_manifest(bad)
    bad = copy.deepcopy(job)
    bad["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = 3
    with pytest.raises(ConfigError, match="Master pod template"):
        validate_manifest(bad)
    with pytest.raises(ConfigError, match="2 or more workers"):
        pytorchjob_manifest("one", "cfg", 1, "img")


@pytest.mark.parametrize("mode", ["dense", "topk"])
def test_collectives_get_their_tensors_on_the_backends_device(mode, monkeypatch):
    """NCCL refuses CPU tensors: what goes into all_reduce / all_gather is on ``collective_device()``
    (here a stand-in device, "meta", since this machine has no GPU), whatever device the gradients are on."""
    from frugalrl.fusion import sync

    assert sync.collective_device() == torch.device("cpu")  # no process group (and gloo): the CPU
    seen: list[torch.device] = []

    class Sent(Exception):
        pass

    def record(*tensors, **kwargs):
        for tensor in tensors:
            for t in tensor if isinstance(tensor, list) else [tensor]:
                seen.append(t.device)
        raise Sent

    monkeypatch.setattr(sync, "collective_device", lambda: torch.device("meta"))
    monkeypatch.setattr(sync.dist, "all_reduce", record)
    monkeypatch.setattr(sync.dist, "all_gather", record)
    fusion = make_reducer(DistributedConfig(workers=2, kind=mode), world_size=2)
    with pytest.raises(Sent):
        fusion._combine([torch.randn(4, 3), torch.randn(3)])
    assert seen and all(device.type == "meta" for device in seen), seen


def test_the_job_schema_takes_the_operators_fields_and_refuses_misspelled_ones(tmp_path, capsys):
    """Fields of the Training Operator's PyTorchJob API (its published models, kubeflow-training) pass; a
    misspelled one, a wrong type or a missing required field fails, named by its path; outputs go to a
    writable volume (emptyDir unless told), and the checked-in example validates through the CLI."""
    import copy

    import yaml

    from frugalrl.cli import main
    from frugalrl.errors import ConfigError
    from frugalrl.fusion.pytorchjob import pytorchjob_manifest, validate_manifest

    job = pytorchjob_manifest("fusion-run", "cfg", 2, "frugalrl:0.1.0-cuda")
    full = copy.deepcopy(job)
    scheduling = {"minAvailable": 2, "queue": "gpu", "priorityClass": "high", "minResources": {"nvidia.com/gpu": "2"},
                  "scheduleTimeoutSeconds": 300}  # fmt: skip
    managed = "kubeflow.org/training-operator"
    full["spec"]["runPolicy"].update(suspend=True, ttlSecondsAfterFinished=600, managedBy=managed,
                                     schedulingPolicy=scheduling)  # fmt: skip
    full["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 4, "maxRestarts": 3, "nProcPerNode": 1,
                                     "rdzvBackend": "c10d", "rdzvPort": 29400, "standalone": False,
                                     "rdzvConf": [{"key": "timeout", "value": "900"}],
                                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                                         "type": "Utilization", "averageUtilization": 80}}}]}  # fmt: skip
    validate_manifest(full)
    for where, key in (("runPolicy", "suspended"), ("elasticPolicy", "maxReplica"), ("spec", "runPolicyy")):
        bad = copy.deepcopy(full)
        (bad["spec"] if where == "spec" else bad["spec"][where])[key] = 1
        with pytest.raises(ConfigError, match=f"{where}/{key}: unknown field"):
            validate_manifest(bad)
    bad = copy.deepcopy(full)
    bad["spec"]["elasticPolicy"]["metrics"][0]["resource"]["targett"] = {}  # Kubernetes types inside the job too
    with pytest.raises(ConfigError, match="elasticPolicy/metrics/0/resource/targett: unknown field"):
        validate_manifest(bad)
    bad = copy.deepcopy(full)
    bad["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "1"
    with pytest.raises(ConfigError, match="Worker/replicas: '1' is not of type int"):
        validate_manifest(bad)
    bad["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 1
    del bad["spec"]["runPolicy"]  # required by the models
    with pytest.raises(ConfigError, match="spec/runPolicy: required, missing"):
        validate_manifest(bad)
    with pytest.raises(ConfigError, match="trainjob validate"):
        validate_manifest({**full, "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob"})
    pod = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    container = pod["containers"][0]
    out_dir = container["command"][container["command"].index("--out") + 1].rsplit("/", 1)[0]
    mounted = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounted[out_dir]] == {"name": "runs", "emptyDir": {}} and pod["securityContext"]["fsGroup"] == 1000
    claim = pytorchjob_manifest(
        "fusion-run", "cfg", 2, "img", output_volume={"persistentVolumeClaim": {"claimName": "runs"}}
    )
    assert claim["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["volumes"][1]["persistentVolumeClaim"]
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(full))
    main(["pytorchjob", "validate", str(path)])
    main(["pytorchjob", "validate", str(REPO / "infra" / "training" / "pytorchjob.yaml")])
    assert capsys.readouterr().out.count("valid PyTorchJob") == 2
