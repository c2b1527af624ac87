"""Render a Kustomize directory with Python alone: the subset of Kustomize that infra/ uses.

    python scripts/kustomize.py infra/overlays/dev > dev.yaml

``make test`` must run on a machine with only Python, and no kubectl or kustomize wheel is on
PyPI; this renders what ``kubectl kustomize`` would for infra/: ``resources`` (files and
directories), ``namespace``, ``labels`` (pairs, metadata only), ``configMapGenerator``
(literals, with a content-hash name suffix like Kustomize's, though not the same characters,
and the references to it renamed) and
``patches`` (JSON 6902 operations on a kind/name target). Anything else in a kustomization is
refused with one line, so a new feature cannot be dropped silently. Where kubectl exists,
``tests/test_infra.py`` checks that both render the same documents (the suffix aside). It
renders for validation; deploy with ``kubectl apply -k``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import yaml

SUPPORTED = {"apiVersion", "kind", "resources", "namespace", "labels", "configMapGenerator", "patches"}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "StorageClass",
                  "PersistentVolume", "PriorityClass"}  # fmt: skip


class KustomizeError(Exception):
    """A kustomization this renderer does not support, or a patch that does not apply."""


def _hash_suffix(config_map: dict[str, Any]) -> str:
    """A name suffix for a generated ConfigMap that changes with its content, as Kustomize's does: sha256
    of its canonical JSON, 10 characters in Kustomize's alphabet (0->g, 1->h, 3->k, a->m, e->t)."""
    canonical = {"kind": "ConfigMap", "name": config_map["metadata"]["name"], "data": config_map.get("data", {})}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    return digest.translate(str.maketrans({"0": "g", "1": "h", "3": "k", "a": "m", "e": "t"}))


def _pointer(path: str) -> list[str]:
    return [part.replace("~1", "/").replace("~0", "~") for part in path.lstrip("/").split("/")]


def _apply_op(doc: Any, op: dict[str, Any]) -> None:
    *parents, last = _pointer(op["path"])
    node = doc
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    key: Any = int(last) if isinstance(node, list) and last != "-" else last
    if op["op"] in ("replace", "add"):
        if isinstance(node, list) and op["op"] == "add":
            node.insert(len(node) if key == "-" else key, op["value"])
        else:
            if op["op"] == "replace" and (key not in node if isinstance(node, dict) else key >= len(node)):
                raise KustomizeError(f"patch {op['path']}: nothing there to replace")
            node[key] = op["value"]
    elif op["op"] == "remove":
        del node[key]
    else:
        raise KustomizeError(f"patch op {op['op']!r} is not supported (add, replace, remove)")


def _rename_config_maps(doc: Any, names: dict[str, str]) -> None:
    """References to generated ConfigMaps (envFrom, env valueFrom, volumes) get their hashed names."""
    if isinstance(doc, dict):
        for key in ("configMapRef", "configMapKeyRef", "configMap"):
            ref = doc.get(key)
            if isinstance(ref, dict) and ref.get("name") in names:
                ref["name"] = names[ref["name"]]
        for value in doc.values():
            _rename_config_maps(value, names)
    elif isinstance(doc, list):
        for value in doc:
            _rename_config_maps(value, names)


def render(directory: Path) -> list[dict[str, Any]]:
    """The documents ``kubectl kustomize directory`` would print (order aside)."""
    directory = Path(directory)
    spec = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unknown = sorted(set(spec) - SUPPORTED)
    if unknown:
        raise KustomizeError(f"{directory}/kustomization.yaml: {unknown} not supported by scripts/kustomize.py")
    docs: list[dict[str, Any]] = []
    for resource in spec.get("resources", []):
        path = directory / resource
        if path.is_dir():
            docs += render(path)
        else:
            docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    generated = {}
    for generator in spec.get("configMapGenerator", []):
        data = dict(line.split("=", 1) for line in generator.get("literals", []))
        config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": generator["name"]}, "data": data}
        generated[generator["name"]] = config_map
        docs.append(config_map)
    for doc in docs:
        meta = doc.setdefault("metadata", {})
        if "namespace" in spec and doc["kind"] not in CLUSTER_SCOPED:
            meta["namespace"] = spec["namespace"]
        for label in spec.get("labels", []):
            meta.setdefault("labels", {}).update(label.get("pairs", {}))
    names = {}
    for name, config_map in generated.items():  # the hash covers the final metadata-free content
        names[name] = f"{name}-{_hash_suffix(config_map)}"
        config_map["metadata"]["name"] = names[name]
    for doc in docs:
        _rename_config_maps(doc, names)
    for patch in spec.get("patches", []):
        target = patch.get("target", {})
        matches = [d for d in docs if d.get("kind") == target.get("kind", d.get("kind"))
                   and d["metadata"].get("name") == target.get("name", d["metadata"].get("name"))]  # fmt: skip
        if not matches:
            raise KustomizeError(f"{directory}: patch target {target} matches no resource")
        for doc in matches:
            for op in yaml.safe_load(patch["patch"]):
                _apply_op(doc, op)
    return [copy.deepcopy(d) for d in docs]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python scripts/kustomize.py DIR", file=sys.stderr)
        return 2
    try:
        print(yaml.safe_dump_all(render(Path(args[0])), sort_keys=False), end="")
    except (KustomizeError, OSError, yaml.YAMLError, KeyError, IndexError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
