"""The step image's build context: the checkout's files, the CPU torch wheel and CA bundle pip uses here, and
the versions CI ran as pip constraints (see ``frugalrl.ops.images`` for the build itself)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

# What goes into the build context besides the extras: what the Dockerfiles COPY.
CONTEXT_PATHS = ("pyproject.toml", "README.md", "src", "components", "pipelines", "configs", "profiles", "images")
# The Python of each Dockerfile's base (python:3.11-slim or Debian bookworm; Ubuntu 22.04): which
# constraints file of the checkout fits it.
FLAVOR_PYTHON = {"cpu": "py311", "cuda": "py310"}


def git_output(repo: Path, *args: str) -> str | None:
    """`git ARGS` in `repo`: its output, or None where git or the checkout is missing."""
    try:
        out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout


def context_files(repo: Path) -> list[str]:
    """The checkout's files a build sends: tracked or not ignored, under ``CONTEXT_PATHS``."""
    listed = git_output(repo, "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", *CONTEXT_PATHS)
    if listed is None:  # not a git checkout (an unpacked sdist): every file but caches
        names = []
        for top in CONTEXT_PATHS:
            path = repo / top
            found = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
            names += [str(p.relative_to(repo)) for p in found if "__pycache__" not in p.parts]
        return names
    return sorted(n for n in set(listed.split("\0")) if n and (repo / n).is_file())


def pip_setting(name: str) -> list[str]:
    """A setting of pip here (``find-links``, ``cert``): its environment variable, then pip's config files."""
    env = os.environ.get(f"PIP_{name.upper().replace('-', '_')}")
    if env:
        return env.split()
    try:
        out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                             timeout=60, check=True).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return []
    values: list[str] = []
    for line in out.splitlines():
        key, _, value = line.partition("=")
        if key.rsplit(".", 1)[-1] == name:
            values += value.strip().strip("'\"").split()
    return list(dict.fromkeys(values))


def local_wheels(torch_spec: str, python_tag: str = "cp311") -> list[Path]:
    """The torch wheel ``torch_spec`` names, for the image's Python, from pip's ``find-links`` here."""
    version = torch_spec.partition("==")[2]
    if not version:
        return []
    found = []
    for place in pip_setting("find-links"):
        directory = Path(place.removeprefix("file://"))
        if directory.is_dir():
            found += sorted(directory.glob(f"torch-{version}*-{python_tag}-*linux*.whl"))
    return found[:1]


def pinned_versions(repo: Path, flavor: str) -> str | None:
    """The checkout's constraints for the image's Python (``constraints/py311.txt``), or ``None``
    where there is none for it (the image then installs from pyproject.toml's ranges)."""
    path = repo / "constraints" / f"{FLAVOR_PYTHON[flavor]}.txt"
    return path.read_text() if path.is_file() else None


def write_context(repo: Path, out: Path, wheels: list[Path], cert: Path | None, constraints: str | None) -> int:
    """The build context as a tar file at ``out``; returns its size in bytes."""
    with tarfile.open(out, "w") as tar:
        for name in context_files(repo):
            tar.add(repo / name, arcname=name, recursive=False)
        for wheel in wheels:
            tar.add(wheel, arcname=f"images/extras/wheels/{wheel.name}")
        if cert is not None:
            tar.add(cert, arcname="images/extras/pip-ca.pem")
        if constraints is not None:
            data = constraints.encode()
            info = tarfile.TarInfo("images/extras/constraints.txt")
            info.size, info.mtime = len(data), 0  # a fixed mtime: the same versions keep the cached layers
            tar.addfile(info, io.BytesIO(data))
    return out.stat().st_size
