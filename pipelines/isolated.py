"""A stage as a cluster runs it: its own empty directory, its declared inputs copied in, only its
declared outputs kept.

kfp.local runs every stage on one disk, so a stage can read what another stage wrote beside its
artifacts, and a cluster would not have uploaded. ``frugalrl pipeline run --isolated`` wraps each
stage's command with this module (``isolated_command``):

1. the executor input's artifacts are copied into a fresh sandbox, as the KFP backend downloads
   them, and the stage sees their sandbox paths only;
2. the stage runs with the sandbox as its working directory and writes its output artifacts there;
3. the declared output artifacts (and the executor's output file) are copied back to where the
   pipeline expects them; everything else in the sandbox is deleted.

A stage that depended on an undeclared file then fails, or its consumer misses the file, here
rather than on the first cluster run.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


def isolated_command(full_command: list[str]) -> list[str]:
    """The stage's command, run through this module's sandbox."""
    return [sys.executable, str(Path(__file__).resolve()), *full_command]


def _copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target, dirs_exist_ok=True)
    elif source.exists():
        shutil.copy2(source, target)


def _sandboxed(executor_input: dict[str, Any], sandbox: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """The executor input with artifact URIs in ``sandbox`` (inputs copied there); output sandbox -> real URI."""
    data = json.loads(json.dumps(executor_input))
    for name, group in data.get("inputs", {}).get("artifacts", {}).items():
        for i, artifact in enumerate(group.get("artifacts", [])):
            copy = sandbox / "inputs" / name / str(i) / Path(artifact["uri"]).name
            _copy(Path(artifact["uri"]), copy)
            artifact["uri"] = str(copy)
    outputs = {}
    for name, group in data.get("outputs", {}).get("artifacts", {}).items():
        for i, artifact in enumerate(group.get("artifacts", [])):
            local = sandbox / "outputs" / name / str(i) / Path(artifact["uri"]).name
            local.parent.mkdir(parents=True, exist_ok=True)
            outputs[str(local)] = artifact["uri"]
            artifact["uri"] = str(local)
    return data, outputs


def _restore_uris(node: Any, outputs: dict[str, str]) -> Any:
    if isinstance(node, dict):
        return {k: (outputs.get(v, v) if k == "uri" and isinstance(v, str) else _restore_uris(v, outputs))
                for k, v in node.items()}  # fmt: skip
    if isinstance(node, list):
        return [_restore_uris(v, outputs) for v in node]
    return node


def run(full_command: list[str]) -> int:
    """Run one stage's command in a sandbox; its exit code."""
    at = full_command.index("--executor_input") + 1
    executor_input = json.loads(full_command[at])
    sandbox = Path(tempfile.mkdtemp(prefix="frugalrl-stage-"))
    try:
        data, outputs = _sandboxed(executor_input, sandbox)
        command = [*full_command[:at], json.dumps(data), *full_command[at + 1 :]]
        work = sandbox / "work"
        work.mkdir()
        code = subprocess.run(command, cwd=work, check=False).returncode
        if code != 0:
            return code
        for local, real in outputs.items():  # declared outputs: what the backend would upload
            _copy(Path(local), Path(real))
        output_file = Path(executor_input["outputs"]["outputFile"])
        if output_file.is_file():  # the executor names the sandbox URIs: the pipeline expects its own
            output_file.write_text(json.dumps(_restore_uris(json.loads(output_file.read_text()), outputs)))
        return 0
    finally:
        shutil.rmtree(sandbox, ignore_errors=True)  # anything undeclared is gone, as on a cluster


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
