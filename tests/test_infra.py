"""infra/ checks run on a machine with only Python: the overlays render without kubectl."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from .conftest import REPO

OVERLAYS = sorted(p.name for p in (REPO / "infra" / "overlays").iterdir() if p.is_dir())


def _documents(text: str) -> list[str]:
    """The rendered documents, order-free, with generated names' hash suffixes blanked."""
    docs = [json.dumps(d, sort_keys=True) for d in yaml.safe_load_all(text) if d]
    return sorted(re.sub(r"(frugalrl-tracking)-[a-z0-9]{10}", r"\1-HASH", d) for d in docs)


def _render(overlay: str) -> str:
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "kustomize.py"), str(REPO / "infra" / "overlays" /
                           overlay)], capture_output=True, text=True, check=True)  # fmt: skip
    return proc.stdout


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_python_renderer_matches_kubectl_kustomize(overlay):
    ours = _documents(_render(overlay))
    assert len(ours) >= 10 and any('"kind": "ConfigMap"' in d and "frugalrl-tracking-HASH" in d for d in ours)
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        print(f"kubectl not installed: {overlay} rendered by scripts/kustomize.py only, not compared")
        return
    theirs = _documents(subprocess.run([kubectl, "kustomize", str(REPO / "infra" / "overlays" / overlay)],
                                       capture_output=True, text=True, check=True).stdout)  # fmt: skip
    assert ours == theirs


def test_infra_checks_pass_without_kubectl_or_terraform(tmp_path):
    """scripts/check_infra.sh with a PATH that holds neither (as on a fresh machine)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "mktemp", "rm", "basename", "grep", "dirname", "cat"):
        if found := shutil.which(tool):
            os.symlink(found, bin_dir / tool)
    venv = os.path.dirname(sys.executable)
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path), "BIN": venv}
    proc = subprocess.run(["bash", str(REPO / "scripts" / "check_infra.sh")], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-1500:]
    assert "rendered infra/overlays/dev/ with scripts/kustomize.py" in proc.stdout
    assert "terraform not installed" in proc.stdout
