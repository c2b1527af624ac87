"""The versions CI ran are the versions installed: ``constraints/pyXY.txt`` pins what ``make setup``,
``.ci/run`` and the step image install; pyproject.toml keeps open ranges for users."""

from __future__ import annotations

import os
import re
import sys
from importlib import metadata

import pytest

from frugalrl.ops.image_context import FLAVOR_PYTHON, pinned_versions

from .conftest import REPO

TAG = f"py{sys.version_info[0]}{sys.version_info[1]}"
PIN = re.compile(r"^([A-Za-z0-9_.-]+)==(\S+)$")


def _pins(text: str) -> dict[str, str]:
    return {m[1].lower().replace("_", "-"): m[2] for line in text.splitlines() if (m := PIN.match(line.strip()))}


def test_every_constraints_file_pins_exact_versions_of_the_dependencies():
    files = sorted((REPO / "constraints").glob("py*.txt"))
    assert files, "constraints/ holds no file; make one with scripts/refresh_constraints.sh"
    for path in files:
        lines = [line for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
        assert lines and all(PIN.match(line) for line in lines), path  # name==version, nothing looser
        pins = _pins(path.read_text())
        for needed in ("torch", "typer", "mlflow", "kfp", "gymnasium", "pytest"):
            assert needed in pins, (path, needed)
        assert "frugalrl" not in pins and not any("+" in version for version in pins.values())


def test_the_installed_versions_are_the_pinned_ones(capsys):
    """Shows the resolved versions; under .ci/run (FRUGALRL_CI=1) every pin must be what is installed."""
    path = REPO / "constraints" / f"{TAG}.txt"
    if not path.is_file():
        pytest.skip(f"no constraints/{TAG}.txt: this Python installs from pyproject.toml's ranges")
    pins = _pins(path.read_text())
    installed = {d.metadata["Name"].lower().replace("_", "-"): d.version for d in metadata.distributions()}
    have = {name: installed.get(name, "").split("+")[0] for name in pins}  # 2.13.0+cpu satisfies 2.13.0
    differ = {name: (want, have[name]) for name, want in pins.items() if have[name] != want}
    with capsys.disabled():
        shown = ", ".join(f"{n}=={installed[n]}" for n in ("torch", "typer", "mlflow", "kfp", "gymnasium", "ale-py"))
        print(f"\nresolved (constraints/{TAG}.txt, {len(pins)} pins, {len(differ)} differ): {shown}")
    if differ and not os.environ.get("FRUGALRL_CI"):
        pytest.skip(f"{len(differ)} installed versions differ from constraints/{TAG}.txt (run make setup): {differ}")
    assert not differ, f"installed versions differ from the pins: {differ}; rm .venv/.frugalrl-installed && make setup"


def test_the_step_image_installs_the_checkout_constraints():
    assert pinned_versions(REPO, "cpu") == (REPO / "constraints" / f"{FLAVOR_PYTHON['cpu']}.txt").read_text()
    # a flavor whose Python has no file installs from the ranges (the build says so)
    if not (REPO / "constraints" / f"{FLAVOR_PYTHON['cuda']}.txt").is_file():
        assert pinned_versions(REPO, "cuda") is None
