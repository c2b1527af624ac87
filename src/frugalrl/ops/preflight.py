"""``frugalrl pipeline check``: what a compiled Kubeflow pipeline needs from its cluster, and what is missing.

Why: a run on a cluster that lacks a Secret key, a node pool or a service account does not fail when it is
submitted; it fails minutes (or a tuning study) later, at the first step that needs the thing, as a pod stuck
Pending or in CreateContainerConfigError. The compiled pipeline already says everything its pods ask for, so a
platform team can read the list before the first run, and check it against the cluster in one command.

The compiled file is KFP v2 IR YAML (``kfp.compiler.Compiler().compile``): the PipelineSpec, then (with
kfp-kubernetes settings) a ``platforms:`` document holding
``platforms.kubernetes.deploymentSpec.executors.<executor-label>``. It is read as YAML, never through kfp
(library code does not import it). A value given as a pipeline parameter (a node selector as
``gpu_node_selector``) is that parameter's compiled default, followed through sub-DAGs (``ParallelFor``,
``dsl.If``, nested pipelines); a run that passes another value needs that one instead. A value only known when
the run starts (another step's output, a parameter without a default) is listed as such and not checked.

The cluster is described in one of two forms.

(a) Written by hand (every key optional; a kind left out means the cluster has none of it)::

    namespace: kubeflow                      # where runs start; the fix commands name it (default: kubeflow)
    secrets:                                 # Secret -> the keys it holds (key names only, never values)
      frugalrl-tracking: [MLFLOW_TRACKING_URI, OPTUNA_STORAGE]
      regcred: [.dockerconfigjson]           # image pull secrets are Secrets too
    config_maps: {frugalrl-config: [A]}      # ConfigMap -> its keys
    service_accounts: [frugalrl-pipeline]
    node_labels:                             # one mapping per node pool: the labels its nodes carry
      - {cloud.google.com/gke-nodepool: cpu-pool}
      - {cloud.google.com/gke-nodepool: gpu-pool}
    node_taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
    gpu_resources: [nvidia.com/gpu]          # extended resources some node offers (its status.allocatable)
    images: [registry.example.com/frugalrl@sha256:...]  # images known pullable; omit to skip the image check

``secrets`` and ``config_maps`` may also be plain lists of names: then only that each exists is checked.

(b) What kubectl prints for the namespace runs start in::

    kubectl -n kubeflow get nodes,secrets,serviceaccounts,configmaps -o yaml > cluster.yaml

a ``kind: List`` whose ``items`` are Nodes (``metadata.labels``, ``spec.taints``, ``status.allocatable``),
Secrets and ConfigMaps (the names of their ``data`` keys; the values are never read into anything) and
ServiceAccounts. Images are not checked in this form (a node's image cache says nothing of what it can pull).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from frugalrl.config import read_text_file
from frugalrl.errors import FrugalError

Steps = tuple[str, ...]  # executor labels (exec-train, ...), sorted

ROOT = "root"  # the owner name of the pipeline's own DAG (components are named comp-...)
DEFAULT_NAMESPACE = "kubeflow"
SHOWN_STEPS = 8  # more step names than this on one line are counted, not named
COMPILE_HINT = "compile one with `frugalrl pipeline compile -o pipeline.yaml`"
SMALL_FORM_KEYS = ("namespace", "secrets", "config_maps", "service_accounts", "node_labels", "node_taints",
                   "gpu_resources", "images")  # fmt: skip
KUBECTL_COMMAND = "kubectl -n NAMESPACE get nodes,secrets,serviceaccounts,configmaps -o yaml"


# ------------------------------------------------------------------ what the pipeline needs


@dataclass(frozen=True)
class Key:
    """One key of a Secret or ConfigMap: the steps that fail without it, and those that run without it."""

    name: str
    required_by: Steps
    optional_for: Steps


@dataclass(frozen=True)
class Store:
    """A Secret or ConfigMap the pods read (as env vars: ``keys``; as files: the whole object).

    ``required_by`` are the steps whose pod does not start without it; ``optional_for`` those that mark it
    optional (Kubernetes starts them without it), so a store only optional steps use is never missing."""

    kind: str  # "secret" or "configmap", as kubectl spells it
    name: str
    keys: tuple[Key, ...]
    required_by: Steps
    optional_for: Steps
    as_files: bool  # mounted as a volume: every key it has, none named

    @property
    def needed_by(self) -> Steps:
        return tuple(sorted({*self.required_by, *self.optional_for}))


@dataclass(frozen=True)
class NodeSelector:
    """Labels a step's node must carry, all of them on one node; ``parameter`` if a pipeline parameter set them."""

    labels: tuple[tuple[str, str], ...]
    needed_by: Steps
    parameter: str | None = None


@dataclass(frozen=True)
class Toleration:
    """A taint a step's pod tolerates (Kubernetes' fields; an empty one matches any)."""

    key: str
    operator: str
    value: str
    effect: str
    needed_by: Steps
    parameter: str | None = None


@dataclass(frozen=True)
class Gpu:
    """An accelerator resource (``nvidia.com/gpu``) steps request, and how many each of their pods asks for."""

    resource: str
    count: str
    needed_by: Steps


@dataclass(frozen=True)
class Named:
    """Something needed by name only (an image, an image pull secret)."""

    name: str
    needed_by: Steps


@dataclass(frozen=True)
class Requirements:
    """Everything a compiled pipeline's pods ask of the cluster, each with the steps that ask for it."""

    pipeline: str
    steps: Steps
    service_account: str  # KFP sets it per run, so the IR cannot say it: the caller names it
    secrets: tuple[Store, ...] = ()
    config_maps: tuple[Store, ...] = ()
    node_selectors: tuple[NodeSelector, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    gpus: tuple[Gpu, ...] = ()
    images: tuple[Named, ...] = ()
    pull_secrets: tuple[Named, ...] = ()
    unresolved: tuple[str, ...] = ()  # values only the run will know: listed, not checked


# ------------------------------------------------------------------ reading YAML


def _yaml_documents(path: Path, what: str, example: str) -> list[Any]:
    """The file's YAML documents (empty ones dropped), or a one-line error: a traceback helps no one here."""
    text = read_text_file(path, what, example)
    try:
        return [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise FrugalError(f"{path}: not valid YAML{where}; pass a {what} ({example})") from None


def _mapping(value: Any) -> dict[str, Any]:
    """``value`` if it is a mapping, else empty: a field the compiler did not write reads as "nothing asked"."""
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _load_ir(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the PipelineSpec, the kubernetes executors' settings by executor label; empty without kfp-kubernetes)."""
    docs = _yaml_documents(path, "compiled pipeline", f"the IR YAML of `frugalrl pipeline compile`; {COMPILE_HINT}")
    spec = docs[0] if docs else None
    if not isinstance(spec, dict) or not isinstance(spec.get("deploymentSpec"), dict) or "root" not in spec:
        raise FrugalError(f"{path}: not a compiled Kubeflow pipeline (no deploymentSpec and root); {COMPILE_HINT}")
    platforms = next((doc["platforms"] for doc in docs[1:] if isinstance(doc, dict) and "platforms" in doc), {})
    kubernetes = _mapping(_mapping(_mapping(platforms).get("kubernetes")).get("deploymentSpec"))
    return spec, _mapping(kubernetes.get("executors"))


# ------------------------------------------------------------------ resolving pipeline parameters


class _Unresolved(Exception):
    """A value the compiled file does not hold (another step's output, a parameter with no default)."""


@dataclass(frozen=True)
class _Graph:
    """Where each component runs from, so a ``componentInputParameter`` can be followed up to a constant or the
    pipeline parameter's default: a step inside ``ParallelFor`` reads ``pipelinechannel--gpu_node_selector``,
    an input of its loop's DAG, which the pipeline's DAG passes from ``gpu_node_selector``."""

    components: dict[str, Any]
    root: dict[str, Any]
    parents: dict[str, list[tuple[str, dict[str, Any]]]]  # component -> [(the DAG's owner, the task in it)]

    def inputs(self, owner: str) -> dict[str, Any]:
        definition = self.root if owner == ROOT else _mapping(self.components.get(owner))
        return _mapping(_mapping(definition.get("inputDefinitions")).get("parameters"))


def _graph(spec: dict[str, Any]) -> _Graph:
    components = _mapping(spec.get("components"))
    root = _mapping(spec.get("root"))
    dags = {ROOT: root, **{name: c for name, c in components.items() if isinstance(c, dict) and "dag" in c}}
    parents: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for owner, definition in dags.items():
        for task in _mapping(_mapping(definition.get("dag")).get("tasks")).values():
            ref = _mapping(_mapping(task).get("componentRef")).get("name")
            if ref:
                parents.setdefault(ref, []).append((owner, task))
    return _Graph(components, root, parents)


def _owners(graph: _Graph, executor: str) -> list[str]:
    """The DAGs whose tasks run ``executor``: its settings' parameters are those DAGs' inputs."""
    names = [n for n, c in graph.components.items() if _mapping(c).get("executorLabel") == executor]
    return [owner for name in names for owner, _ in graph.parents.get(name, [])]


def _resolve(graph: _Graph, owner: str, name: str, depth: int = 0) -> Any:
    """The value input ``name`` of DAG ``owner`` gets: what the task running it passes, else its default."""
    if depth > 64:  # only a malformed (cyclic) file nests this deep
        raise _Unresolved(f"parameter {name} (cyclic)")
    for parent, task in graph.parents.get(owner, []):
        ref = _mapping(_mapping(task.get("inputs")).get("parameters")).get(name)
        if isinstance(ref, dict):
            return _value(graph, parent, ref, depth + 1)
    definition = _mapping(graph.inputs(owner).get(name))
    if "defaultValue" not in definition:
        raise _Unresolved(f"parameter {name} has no default")
    return definition["defaultValue"]


def _value(graph: _Graph, owner: str, ref: dict[str, Any], depth: int = 0) -> Any:
    if "runtimeValue" in ref:
        return _mapping(ref["runtimeValue"]).get("constant")
    if "componentInputParameter" in ref:
        return _resolve(graph, owner, str(ref["componentInputParameter"]), depth)
    raise _Unresolved("another step's output")


@dataclass
class _Executor:
    """One executor's kubernetes settings, and how to read its parameterised values."""

    label: str
    settings: dict[str, Any]
    graph: _Graph
    unresolved: list[str] = field(default_factory=list)

    def value(self, ref: Any, what: str) -> tuple[Any, str | None]:
        """(the value, the pipeline parameter it came from); (None, None) and a note when the run decides it."""
        ref = _mapping(ref)
        parameter = ref.get("componentInputParameter")
        try:
            owner = next(iter(_owners(self.graph, self.label)), ROOT)
            found = _value(self.graph, owner, ref)
        except _Unresolved as exc:
            self.unresolved.append(f"{what} of {self.label}: set when the run starts ({exc})")
            return None, None
        if found in (None, ""):
            self.unresolved.append(f"{what} of {self.label}: set when the run starts (empty in the pipeline)")
            return None, None
        return found, _root_name(str(parameter)) if parameter else None

    def name(self, entry: dict[str, Any], field_name: str, what: str) -> str | None:
        """A Secret or ConfigMap name: ``<field>Parameter`` (kfp-kubernetes 1.3 and later), else ``<field>``."""
        if isinstance(entry.get(f"{field_name}Parameter"), dict):
            found, _ = self.value(entry[f"{field_name}Parameter"], what)
            return None if found is None else str(found)
        return str(entry[field_name]) if entry.get(field_name) else None


def _root_name(parameter: str) -> str:
    """``pipelinechannel--gpu_node_selector`` -> ``gpu_node_selector``: the name a run passes."""
    return parameter.removeprefix("pipelinechannel--")


# ------------------------------------------------------------------ one executor's needs


@dataclass(frozen=True)
class _StoreUse:
    step: str
    name: str
    keys: tuple[str, ...]
    optional: bool
    as_files: bool


def _store_uses(ex: _Executor, kind: str) -> Iterator[_StoreUse]:
    """Every Secret (``kind`` secret) or ConfigMap (configMap) the executor mounts or reads as env vars."""
    key_field = "secretKey" if kind == "secret" else "configMapKey"
    for setting, as_files in ((f"{kind}AsEnv", False), (f"{kind}AsVolume", True)):
        for entry in map(_mapping, _list(ex.settings.get(setting))):
            name = ex.name(entry, f"{kind}Name", f"{kind} name")
            keys = tuple(str(k[key_field]) for k in map(_mapping, _list(entry.get("keyToEnv"))) if key_field in k)
            if name is not None:
                yield _StoreUse(ex.label, name, keys, bool(entry.get("optional", False)), as_files)


def _node_selector(ex: _Executor) -> NodeSelector | None:
    selector = _mapping(ex.settings.get("nodeSelector"))
    labels, parameter = selector.get("labels"), None
    if "nodeSelectorJson" in selector:
        labels, parameter = ex.value(selector["nodeSelectorJson"], "node selector")
    if not isinstance(labels, dict) or not labels:
        return None
    pairs = tuple(sorted((str(k), _label(v)) for k, v in labels.items()))
    return NodeSelector(pairs, (ex.label,), parameter)


def _label(value: Any) -> str:
    """A label value as Kubernetes writes it: YAML reads ``true`` and ``1`` as a bool and an int."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _tolerations(ex: _Executor) -> Iterator[Toleration]:
    for entry in map(_mapping, _list(ex.settings.get("tolerations"))):
        items, parameter = [entry], None
        if "tolerationJson" in entry:
            found, parameter = ex.value(entry["tolerationJson"], "toleration")
            items = found if isinstance(found, list) else [found]  # add_toleration_json takes a dict or a list
        for item in map(_mapping, items):
            if item:
                fields = (str(item.get(f, "")) for f in ("key", "operator", "value", "effect"))
                yield Toleration(*fields, needed_by=(ex.label,), parameter=parameter)


def _pull_secrets(ex: _Executor) -> Iterator[str]:
    for entry in map(_mapping, _list(ex.settings.get("imagePullSecret"))):
        name = ex.name(entry, "secretName", "image pull secret")
        if name is not None:
            yield name


def _gpu(label: str, container: dict[str, Any]) -> Gpu | None:
    """The accelerator a container asks for: ``resourceType``/``resourceCount`` (kfp 2.9+) or ``type``/``count``."""
    accelerator = _mapping(_mapping(container.get("resources")).get("accelerator"))
    resource = accelerator.get("resourceType") or accelerator.get("type")
    count = accelerator.get("resourceCount") or accelerator.get("count") or "1"
    return Gpu(str(resource), str(count), (label,)) if resource else None


# ------------------------------------------------------------------ grouping by item


def _split(uses: list[_StoreUse]) -> tuple[Steps, Steps]:
    """(steps that need it, steps that only use it optionally)."""
    required = {u.step for u in uses if not u.optional}
    return tuple(sorted(required)), tuple(sorted({u.step for u in uses} - required))


def _stores(kind: str, uses: list[_StoreUse]) -> tuple[Store, ...]:
    """One Store per name; its keys required first (what must be there before a run), then by name."""
    stores = []
    for name in sorted({u.name for u in uses}):
        mine = [u for u in uses if u.name == name]
        keys = [Key(key, *_split([u for u in mine if key in u.keys])) for key in {k for u in mine for k in u.keys}]
        keys.sort(key=lambda k: (not k.required_by, k.name))
        stores.append(Store(kind, name, tuple(keys), *_split(mine), any(u.as_files for u in mine)))
    return tuple(stores)


def _merged(items: Iterable[Any]) -> tuple[Any, ...]:
    """One item per distinct need, its ``needed_by`` every step that asked for it (a need shared by many steps is
    one line, not many)."""
    steps: dict[Any, set[str]] = {}
    for item in items:
        steps.setdefault(replace(item, needed_by=()), set()).update(item.needed_by)
    merged = (replace(item, needed_by=tuple(sorted(found))) for item, found in steps.items())
    return tuple(sorted(merged, key=str))


def requirements(ir_path: Path, service_account: str) -> Requirements:
    """What the pipeline compiled to ``ir_path`` needs from its cluster; runs start as ``service_account``."""
    spec, platform = _load_ir(ir_path)
    graph = _graph(spec)
    executors = [_Executor(str(label), _mapping(s), graph) for label, s in platform.items()]
    containers = {  # importers and resolvers run no pod of the pipeline's own
        str(label): _mapping(_mapping(e).get("container"))
        for label, e in _mapping(spec["deploymentSpec"].get("executors")).items()
        if "container" in _mapping(e)
    }
    images = (Named(str(c["image"]), (label,)) for label, c in containers.items() if c.get("image"))
    pulls = (Named(name, (ex.label,)) for ex in executors for name in _pull_secrets(ex))
    return Requirements(
        pipeline=str(_mapping(spec.get("pipelineInfo")).get("name", ir_path.stem)),
        steps=tuple(sorted(containers)),
        service_account=service_account,
        secrets=_stores("secret", [u for ex in executors for u in _store_uses(ex, "secret")]),
        config_maps=_stores("configmap", [u for ex in executors for u in _store_uses(ex, "configMap")]),
        node_selectors=_merged(s for s in map(_node_selector, executors) if s is not None),
        tolerations=_merged(t for ex in executors for t in _tolerations(ex)),
        gpus=_merged(g for label, c in containers.items() if (g := _gpu(label, c)) is not None),
        images=_merged(images),
        pull_secrets=_merged(pulls),
        unresolved=tuple(dict.fromkeys(note for ex in executors for note in ex.unresolved)),
    )


# ------------------------------------------------------------------ the listing


def _steps(steps: Steps) -> str:
    """``2 steps: exec-register, exec-train``; past SHOWN_STEPS names, the rest counted."""
    shown = ", ".join(steps[:SHOWN_STEPS])
    more = f" and {len(steps) - SHOWN_STEPS} more" if len(steps) > SHOWN_STEPS else ""
    return f"{len(steps)} step{'s' if len(steps) != 1 else ''}: {shown}{more}"


def _store_line(store: Store) -> str:
    keys = [f"{k.name} ({'required' if k.required_by else 'optional'})" for k in store.keys]
    if store.as_files:
        keys.append("mounted as files")
    optional = "" if store.required_by else " (optional)"
    return f"{store.kind} {store.name}{optional}: {', '.join(keys)} — needed by {_steps(store.needed_by)}"


def _selector_text(labels: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(f"{k}={v}" for k, v in labels)


def _from(parameter: str | None) -> str:
    return f" (pipeline parameter {parameter})" if parameter else ""


def _toleration_text(t: Toleration) -> str:
    taint = f"{t.key or '<any key>'}={t.value}" if t.value else t.key or "<any key>"
    return f"{taint} ({t.operator or 'Equal'}, {t.effect or 'any effect'})"  # Kubernetes' defaults when unset


def _section(heading: str, lines: list[str]) -> list[str]:
    return [f"{heading}:", *(f"  {line}" for line in lines or ["none"])]


def format_requirements(req: Requirements) -> list[str]:
    """The listing a platform team reads: one line per thing the cluster must hold, under a heading per kind."""
    return [
        f"pipeline {req.pipeline}: {_steps(req.steps)}",
        *_section("Secrets", [_store_line(s) for s in req.secrets]),
        *_section("ConfigMaps", [_store_line(s) for s in req.config_maps]),
        *_section("Service account", [f"serviceaccount {req.service_account} — runs start as it "
                                      "(KFP sets it per run; --service-account names another)"]),
        *_section("Node pools", [f"node labels {_selector_text(s.labels)}{_from(s.parameter)} — needed by "
                                 f"{_steps(s.needed_by)}" for s in req.node_selectors]),
        *_section("GPUs", [f"{g.resource}: {g.count} per pod — needed by {_steps(g.needed_by)}"
                           for g in req.gpus]),
        *_section("Tolerations", [f"toleration {_toleration_text(t)}{_from(t.parameter)} — needed by "
                                  f"{_steps(t.needed_by)}" for t in req.tolerations]),
        *_section("Images", [f"image {i.name} — needed by {_steps(i.needed_by)}" for i in req.images]),
        *_section("Image pull secrets", [f"secret {p.name} — needed by {_steps(p.needed_by)}"
                                         for p in req.pull_secrets]),
        *(_section("Set when the run starts (not checked)", list(req.unresolved)) if req.unresolved else []),
    ]  # fmt: skip


# ------------------------------------------------------------------ the cluster


@dataclass(frozen=True)
class Cluster:
    """What a cluster holds, as far as the check needs it. A store's keys are None where only its name is known."""

    namespace: str = DEFAULT_NAMESPACE
    secrets: dict[str, frozenset[str] | None] = field(default_factory=dict)
    config_maps: dict[str, frozenset[str] | None] = field(default_factory=dict)
    service_accounts: frozenset[str] = frozenset()
    node_labels: tuple[dict[str, str], ...] = ()  # one mapping per node (or node pool)
    node_taints: tuple[dict[str, str], ...] = ()
    node_resources: frozenset[str] = frozenset()  # extended resources some node has allocatable (nvidia.com/gpu)
    images: frozenset[str] | None = None  # None: not known, the image check is skipped


def load_cluster(path: Path) -> Cluster:
    """The cluster ``path`` describes: kubectl's ``kind: List``, or the small form (this module's docstring)."""
    example = f"a cluster description (see frugalrl.ops.preflight) or the output of {KUBECTL_COMMAND}"
    docs = _yaml_documents(path, "cluster description", example)
    data = docs[0] if len(docs) == 1 else None
    if not isinstance(data, dict):
        raise FrugalError(f"{path}: neither a cluster description nor kubectl's List (one YAML mapping); "
                          f"write one (see frugalrl.ops.preflight) or save {KUBECTL_COMMAND}")  # fmt: skip
    if data.get("kind") == "List" or "items" in data:
        return _kubectl_cluster(data, path)
    if "kind" in data:
        raise FrugalError(f"{path}: one {data['kind']}, not a List of the cluster's objects; "
                          f"save {KUBECTL_COMMAND}")  # fmt: skip
    unknown = sorted(set(data) - set(SMALL_FORM_KEYS), key=str)
    if unknown:
        raise FrugalError(f"{path}: unknown key {unknown[0]!r} in the cluster description; "
                          f"its keys are {', '.join(SMALL_FORM_KEYS)} (see frugalrl.ops.preflight)")  # fmt: skip
    return _small_cluster(data, path)


class _Shape:
    """Type checks of the small form's values: each failure one line naming the key and an example."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, key: str, example: str) -> FrugalError:
        return FrugalError(f"{self.path}: {key} must be {example}")

    def names(self, value: Any, key: str) -> frozenset[str]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(key, "a list of names, e.g. [frugalrl-pipeline]")
        return frozenset(value)

    def stores(self, value: Any, key: str) -> dict[str, frozenset[str] | None]:
        if isinstance(value, list):
            return dict.fromkeys(self.names(value, key))  # names only: keys not checked
        if not isinstance(value, dict) or not all(isinstance(v, list | type(None)) for v in value.values()):
            raise self.fail(key, "a mapping of name to its keys, e.g. {frugalrl-tracking: [MLFLOW_TRACKING_URI]}")
        return {str(k): frozenset(map(str, v or [])) for k, v in value.items()}

    def mappings(self, value: Any, key: str, example: str) -> tuple[dict[str, str], ...]:
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise self.fail(key, f"a list of mappings, e.g. {example}")
        return tuple({str(k): _label(v) for k, v in item.items()} for item in value)


def _small_cluster(data: dict[str, Any], path: Path) -> Cluster:
    shape = _Shape(path)
    namespace = data.get("namespace", DEFAULT_NAMESPACE)
    if not isinstance(namespace, str) or not namespace:
        raise shape.fail("namespace", "a namespace name, e.g. kubeflow")
    images = data.get("images")
    return Cluster(
        namespace=namespace,
        secrets=shape.stores(data.get("secrets", []), "secrets"),
        config_maps=shape.stores(data.get("config_maps", []), "config_maps"),
        service_accounts=shape.names(data.get("service_accounts", []), "service_accounts"),
        node_labels=shape.mappings(data.get("node_labels", []), "node_labels",
                                   "[{cloud.google.com/gke-nodepool: gpu-pool}]"),
        node_taints=shape.mappings(data.get("node_taints", []), "node_taints",
                                   "[{key: nvidia.com/gpu, effect: NoSchedule}]"),
        node_resources=shape.names(data.get("gpu_resources", []), "gpu_resources"),
        images=None if images is None else shape.names(images, "images"),
    )  # fmt: skip


def _key_names(item: dict[str, Any], *fields: str) -> frozenset[str]:
    """The names of a Secret's or ConfigMap's keys; the values (base64 secrets) are never kept."""
    return frozenset(str(k) for f in fields for k in _mapping(item.get(f)))


def _allocatable(node: dict[str, Any]) -> set[str]:
    allocatable = _mapping(_mapping(node.get("status")).get("allocatable"))
    return {str(name) for name, amount in allocatable.items() if str(amount) not in ("0", "")}


def _kubectl_cluster(data: dict[str, Any], path: Path) -> Cluster:
    items = data.get("items")
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise FrugalError(f"{path}: a List whose items are not Kubernetes objects; save {KUBECTL_COMMAND}")
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        by_kind.setdefault(str(item.get("kind")), []).append(item)
    namespaces = sorted({str(_mapping(i.get("metadata")).get("namespace")) for i in items
                         if i.get("kind") != "Node" and _mapping(i.get("metadata")).get("namespace")})  # fmt: skip
    if len(namespaces) > 1:  # a Secret in another namespace is no use to a run, so one namespace is checked
        raise FrugalError(f"{path}: objects from several namespaces ({', '.join(namespaces)}); "
                          f"save one: {KUBECTL_COMMAND}")  # fmt: skip
    nodes = by_kind.get("Node", [])
    return Cluster(
        namespace=namespaces[0] if namespaces else DEFAULT_NAMESPACE,
        secrets={_name(i): _key_names(i, "data", "stringData") for i in by_kind.get("Secret", [])},
        config_maps={_name(i): _key_names(i, "data", "binaryData") for i in by_kind.get("ConfigMap", [])},
        service_accounts=frozenset(_name(i) for i in by_kind.get("ServiceAccount", [])),
        node_labels=tuple({str(k): _label(v) for k, v in _mapping(_mapping(n.get("metadata")).get("labels")).items()}
                          for n in nodes),
        node_taints=tuple({str(k): str(v) for k, v in _mapping(t).items()}
                          for n in nodes for t in _list(_mapping(n.get("spec")).get("taints"))),
        node_resources=frozenset(r for n in nodes for r in _allocatable(n)),
    )  # fmt: skip


def _name(item: dict[str, Any]) -> str:
    return str(_mapping(item.get("metadata")).get("name", ""))


# ------------------------------------------------------------------ what is missing


def _create_command(store: Store, namespace: str) -> str:
    """The kubectl line that makes the store with every required key (values for the user to fill in)."""
    what = "secret generic" if store.kind == "secret" else "configmap"
    literals = "".join(f" --from-literal={k.name}=..." for k in store.keys if k.required_by)
    return f"kubectl -n {namespace} create {what} {store.name}{literals}"


def _patch_command(store: Store, key: str, namespace: str) -> str:
    """Adds one key and keeps the others (stringData: kubectl encodes it, so no base64 by hand)."""
    field_name = "stringData" if store.kind == "secret" else "data"
    patch = f'{{"{field_name}":{{"{key}":"..."}}}}'
    return f"kubectl -n {namespace} patch {store.kind} {store.name} --type merge -p '{patch}'"


def _missing_stores(stores: tuple[Store, ...], held: dict[str, frozenset[str] | None], namespace: str) -> list[str]:
    lines = []
    for store in (s for s in stores if s.required_by):  # one only optional steps use may be absent
        if store.name not in held:
            lines.append(f"{store.kind} {store.name} not found (required by {_steps(store.required_by)}); "
                         f"create it: {_create_command(store, namespace)}")  # fmt: skip
            continue
        keys = held[store.name]
        for key in (k for k in store.keys if k.required_by and keys is not None and k.name not in keys):
            lines.append(f"{store.kind} {store.name} has no key {key.name} (required by {_steps(key.required_by)});"
                         f" add it: {_patch_command(store, key.name, namespace)}")  # fmt: skip
    return lines


def _missing_selectors(req: Requirements, cluster: Cluster) -> list[str]:
    lines = []
    for selector in req.node_selectors:
        if not any(all(node.get(k) == v for k, v in selector.labels) for node in cluster.node_labels):
            instead = f", or run with another {selector.parameter}" if selector.parameter else ""
            lines.append(f"no node carries {_selector_text(selector.labels)} (needed by {_steps(selector.needed_by)})"
                         f"; label a node pool with it{instead}")  # fmt: skip
    return lines


def _same_image(wanted: str, known: frozenset[str]) -> bool:
    """The same reference, or the same digest under another name (a registry mirror)."""
    digest = wanted.partition("@")[2]
    return wanted in known or (bool(digest) and any(k.partition("@")[2] == digest for k in known))


def missing(req: Requirements, cluster: Cluster) -> list[str]:
    """One line per thing the pipeline needs that the cluster lacks, with the fix; empty when nothing is."""
    ns = cluster.namespace
    lines = _missing_stores(req.secrets, cluster.secrets, ns)
    lines += _missing_stores(req.config_maps, cluster.config_maps, ns)
    if req.service_account not in cluster.service_accounts:
        lines.append(f"service account {req.service_account} not found in namespace {ns}; "
                     f"create it: kubectl -n {ns} create serviceaccount {req.service_account}")  # fmt: skip
    lines += _missing_selectors(req, cluster)
    lines += [f"no node offers {g.resource} (GPU steps: {_steps(g.needed_by)}); add a GPU node pool with its "
              "device plugin" for g in req.gpus if g.resource not in cluster.node_resources]  # fmt: skip
    lines += [f"image pull secret {p.name} not found (needed by {_steps(p.needed_by)}); create it: kubectl -n {ns} "
              f"create secret docker-registry {p.name} --docker-server=... --docker-username=... --docker-password=..."
              for p in req.pull_secrets if p.name not in cluster.secrets]  # fmt: skip
    if cluster.images is not None:
        lines += [f"image {i.name} is not among the cluster's images (needed by {_steps(i.needed_by)}); push it, "
                  "or add it to images: in the cluster description" for i in req.images
                  if not _same_image(i.name, cluster.images)]  # fmt: skip
    return lines


def _tolerates(t: Toleration, taint: dict[str, str]) -> bool:
    """Kubernetes' rule: Exists matches the key (an empty key every taint), Equal the key and value too."""
    if t.effect and t.effect != taint.get("effect"):
        return False
    if t.operator == "Exists":
        return not t.key or t.key == taint.get("key")
    return t.key == taint.get("key") and t.value == taint.get("value", "")


def notes(req: Requirements, cluster: Cluster) -> list[str]:
    """What looks off but does not stop a run: a toleration no node taint needs (the pool may be untainted)."""
    return [f"toleration {_toleration_text(t)}{_from(t.parameter)} matches no node taint (needed by "
            f"{_steps(t.needed_by)}); harmless, but the pool it is for may not be tainted as expected"
            for t in req.tolerations if not any(_tolerates(t, taint) for taint in cluster.node_taints)]  # fmt: skip
