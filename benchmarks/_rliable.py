"""rliable in its own venv: where that venv's Python is, and the file it runs (``_rliable_side.py``).

rliable 1.2.0 cannot join this project's venv (``frugalrl.stats`` says why); ``rliable_check`` and
``rliable_improvement`` both hand it their scores through ``_rliable_side.py`` under ``make rliable-venv``'s Python.
"""

from __future__ import annotations

from pathlib import Path

DEFAULT_PYTHON = Path(".venv-rliable") / "bin" / "python"
SIDE = Path(__file__).with_name("_rliable_side.py")
