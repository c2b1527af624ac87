"""The lab beside the product: ``benchmarks`` imports frugalrl, never the other way, and keeps its own shape.

- nothing in the product (``src/frugalrl``, ``pipelines``, ``components``) imports ``benchmarks``, which is
  not installed with frugalrl;
- every module of ``benchmarks`` imports without running anything, and every script has a ``main``;
- a module of ``benchmarks`` imports only the shared helpers (``_report``, ``_harness``, ...: a leading
  underscore), never another script, and never edits ``sys.path``.

Read with ``ast``, so a comment or a string that names a module does not count and an import inside a
function does.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import pytest

from .conftest import REPO

BENCH = REPO / "benchmarks"
PRODUCT = [REPO / "src" / "frugalrl", REPO / "pipelines", REPO / "components"]
# Runs as a file under rliable's own venv (benchmarks/_rliable_side.py's docstring): rliable is not in this one.
OTHER_VENV = {"_rliable_side"}


def _modules() -> list[str]:
    """The modules of ``benchmarks`` by name (``__init__`` aside)."""
    return sorted(p.stem for p in BENCH.glob("*.py") if p.stem != "__init__")


def imported(source: str, package: str | None = None) -> list[tuple[int, str]]:
    """(line, module) for every module an ``import`` in ``source`` names, absolute. Inside ``package``,
    ``from . import x`` names ``package.x`` and ``from .m import y`` names ``package.m``; with no ``package``
    (a product file) relative imports stay inside their own package and are left out. ``from benchmarks
    import x`` names the module ``benchmarks.x``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level and package is None:
                continue
            target = ".".join(filter(None, [package if node.level else None, node.module]))
            if target == (package or "benchmarks"):  # a package: the names are its modules
                found += [(node.lineno, f"{target}.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, target))
    return found


def lab_imports(source: str) -> list[tuple[int, str]]:
    """The imports of ``benchmarks`` in a product file's ``source``."""
    return [(line, name) for line, name in imported(source) if name.split(".")[0] == "benchmarks"]


def wrong_turns(source: str, siblings: set[str]) -> list[tuple[int, str]]:
    """What a module of ``benchmarks`` (``source``) must not do, by line: import a script (a sibling without a
    leading underscore), import a sibling as a top-level module (found through ``sys.path``, not the package),
    touch ``sys.path``."""
    out = []
    for line, name in imported(source, package="benchmarks"):
        parts = name.split(".")
        if parts[0] in siblings:
            out.append((line, f"imports {name} as a top-level module, not from the package"))
        elif parts[0] == "benchmarks" and len(parts) > 1 and parts[1] in siblings and not parts[1].startswith("_"):
            out.append((line, f"imports the script {parts[1]}: what scripts share belongs in a helper module"))
    out += [
        (node.lineno, "touches sys.path")
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", None) == "sys"
    ]
    return out


def test_the_product_never_imports_the_lab():
    found = [f"{path.relative_to(REPO)}:{line} {name}" for root in PRODUCT for path in sorted(root.rglob("*.py"))
             for line, name in lab_imports(path.read_text())]  # fmt: skip
    assert not found, found


def test_a_lab_module_imports_helpers_only_and_leaves_sys_path_alone():
    siblings = set(_modules())
    found = [f"{path.name}:{line} {what}" for path in sorted(BENCH.glob("*.py"))
             for line, what in wrong_turns(path.read_text(), siblings)]  # fmt: skip
    assert not found, found


def test_the_checks_catch_what_they_look_for():
    """Each kind of wrong turn is found: relative, absolute and in-function imports, and a sys.path edit."""
    source = (
        "import sys\n"
        "from . import _report, pivot_vs_ppo\n"
        "from .atari_equal_cpu import latest\n"
        "import benchmarks.ledger\n"
        "import _harness\n"
        "from ._report import mmm\n"
        "\n"
        "def f():\n"
        "    from benchmarks import fusion\n"
        "    sys.path.insert(0, 'x')\n"
    )
    siblings = {"_report", "_harness", "pivot_vs_ppo", "atari_equal_cpu", "ledger", "fusion"}
    assert [line for line, _ in wrong_turns(source, siblings)] == [2, 3, 4, 5, 9, 10]
    assert lab_imports(source) == [(4, "benchmarks.ledger"), (9, "benchmarks.fusion")]
    assert lab_imports("from . import benchmarks\n") == []  # a product package's own relative import


@pytest.mark.slow  # about 4 s: torch, gymnasium and Stable-Baselines3 imported in a fresh process
def test_every_lab_module_imports_without_running_anything_and_every_script_has_a_main(tmp_path):
    """All in one fresh process (the imports are torch's and gymnasium's): no output, no file written where it
    runs, no exit. A script that ran at import would parse this process's arguments and stop."""
    names = [f"benchmarks.{m}" for m in _modules() if m not in OTHER_VENV]
    code = (
        "import contextlib, importlib, io, json, sys\n"
        "found = {}\n"
        "for name in sys.argv[1:]:\n"
        "    printed = io.StringIO()\n"
        "    with contextlib.redirect_stdout(printed):\n"
        "        module = importlib.import_module(name)\n"
        "    found[name] = {'main': callable(getattr(module, 'main', None)), 'printed': printed.getvalue()}\n"
        "print(json.dumps(found))\n"
    )
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-c", code, *names], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": path}, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout)
    assert sorted(found) == names
    assert {name: seen["printed"] for name, seen in found.items() if seen["printed"]} == {}
    scripts = [name for name in names if not name.split(".")[-1].startswith("_")]
    assert [name for name in scripts if not found[name]["main"]] == []
    assert list(tmp_path.iterdir()) == []  # nothing written into the working directory
