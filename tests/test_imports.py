"""Import structure: no module-level import cycle in frugalrl; one module downloads MLflow artifacts."""

from __future__ import annotations

import ast
from pathlib import Path

from .conftest import REPO

SRC = REPO / "src" / "frugalrl"


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_level_imports(tree: ast.Module, name: str, is_package: bool) -> set[str]:
    """Modules imported at module level (``if``/``try`` blocks included; function bodies not)."""
    found: set[str] = set()
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                module = ".".join(base[: len(base) - node.level + 1] + ([module] if module else []))
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)  # a submodule imported by name
        elif isinstance(node, ast.If | ast.Try):
            stack.extend(node.body + node.orelse + getattr(node, "handlers", []) + getattr(node, "finalbody", []))
        elif isinstance(node, ast.ExceptHandler):
            stack.extend(node.body)
    return found


def import_graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in SRC.rglob("*.py")}
    return {
        name: {m for m in _top_level_imports(ast.parse(p.read_text()), name, p.name == "__init__.py") if m in files}
        - {name}
        for name, p in files.items()
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_module_level_import_cycle():
    graph = import_graph()
    assert "frugalrl.peft.store" not in graph["frugalrl.policy_store"]
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_config_imports_nothing_above_it():
    """The config sections import only each other at module level; what they validate against (env ids,
    PEFT methods, registries) is imported inside the validator, so the package loads first and light."""
    graph = import_graph()
    config = {name: deps for name, deps in graph.items() if name.split(".")[:2] == ["frugalrl", "config"]}
    leaves = {"frugalrl.errors", "frugalrl.credentials"}  # the error type and redaction, which import no config
    assert len(config) > 1, "frugalrl.config is a package"
    upward = {name: sorted(d for d in deps if d not in config and d not in leaves) for name, deps in config.items()}
    assert not any(upward.values()), upward


def test_find_cycle_sees_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_only_the_resolver_downloads_artifacts():
    callers = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if "download_artifacts" in p.read_text())
    assert callers == ["tracking/artifacts.py"]
