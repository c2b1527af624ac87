"""rliable in its own venv: where that venv's Python is, and the file it runs (``_rliable_side.py``).

rliable 1.2.0 cannot join this project's venv (``frugalrl.stats`` says why); ``rliable_check`` and
``rliable_improvement`` both hand it their scores through ``_rliable_side.py`` under ``make rliable-venv``'s Python.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

DEFAULT_PYTHON = Path(".venv-rliable") / "bin" / "python"
SIDE = Path(__file__).with_name("_rliable_side.py")


def add_python_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rliable-python", type=Path, default=DEFAULT_PYTHON,
                        help="the Python of a venv with rliable (made by `make rliable-venv`)")  # fmt: skip


def ask(python: Path, request: dict) -> dict:
    """``_rliable_side.py``'s answer to ``request`` (its docstring says the two forms), run by ``python``."""
    if not python.exists():
        raise SystemExit(f"no rliable venv at {python}: make one with `make rliable-venv` (or pass --rliable-python)")
    done = subprocess.run([str(python), str(SIDE)], input=json.dumps(request), capture_output=True, text=True,
                          check=False)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"rliable failed in {python}: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout)
