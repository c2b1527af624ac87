"""``frugalrl pipeline check``: the listing of what a compiled pipeline needs, and the check against a cluster.

The pipelines are built here with kfp.dsl and kfp.kubernetes and compiled as users compile them, so the IR read
is the IR kfp writes (both documents), not a hand-written imitation of it. No ``from __future__ import
annotations`` here: kfp reads the components' annotations as types, not strings.
"""

import base64
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from frugalrl.cli import main
from frugalrl.ops import preflight

IMAGE = "registry.example.com/frugalrl@sha256:" + "a" * 64
GPU_POOL = {"cloud.google.com/gke-nodepool": "gpu-pool"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
TRACKING_URI = "http://mlflow.internal:5000"  # a secret's value: must never be printed


def _compile_pipelines(where: Path) -> dict[str, Path]:
    """Two compiled pipelines: ``full`` (every kind of need, one step inside a ParallelFor) and ``runtime``
    (values only a run knows)."""
    from kfp import compiler, dsl, kubernetes

    @dsl.component(base_image=IMAGE)
    def train(x: int) -> str:
        return str(x)

    @dsl.component(base_image=IMAGE)
    def register(model: str) -> None:
        pass

    @dsl.pipeline(name="preflight-test")
    def full(
        gpu_node_selector: dict = GPU_POOL,
        gpu_toleration: dict = GPU_TOLERATION,
        tracking_secret: str = "frugalrl-tracking",
    ) -> None:
        trained = train(x=1)
        kubernetes.use_secret_as_env(trained, "frugalrl-tracking", {"MLFLOW_TRACKING_URI": "MLFLOW_TRACKING_URI"})
        kubernetes.use_secret_as_env(  # the name as a pipeline parameter: resolved to its default
            trained, tracking_secret, {"MLFLOW_TRACKING_TOKEN": "MLFLOW_TRACKING_TOKEN"}, optional=True
        )
        kubernetes.use_secret_as_env(trained, "frugalrl-tuning", {"OPTUNA_STORAGE": "OPTUNA_STORAGE"}, optional=True)
        kubernetes.use_config_map_as_env(trained, "frugalrl-config", {"CONFIG": "CONFIG"})
        kubernetes.add_node_selector_json(trained, gpu_node_selector)
        kubernetes.add_toleration_json(trained, gpu_toleration)
        kubernetes.set_image_pull_secrets(trained, ["regcred"])
        trained.set_accelerator_type("nvidia.com/gpu").set_accelerator_limit(1)
        with dsl.ParallelFor(items=[0, 1], name="workers") as item:
            worker = train(x=item)  # reads pipelinechannel--gpu_node_selector, its loop DAG's input
            kubernetes.add_node_selector_json(worker, gpu_node_selector)
            kubernetes.add_toleration_json(worker, gpu_toleration)
        registered = register(model=trained.output)
        registered.after(worker)
        kubernetes.use_secret_as_env(registered, "frugalrl-tracking", {"MLFLOW_TRACKING_URI": "MLFLOW_TRACKING_URI"})
        kubernetes.add_node_selector(registered, "cloud.google.com/gke-nodepool", "cpu-pool")
        kubernetes.add_toleration(registered, key="dedicated", operator="Equal", value="ml", effect="NoSchedule")

    @dsl.pipeline(name="preflight-runtime")
    def runtime(secret_name: str = "") -> None:
        first = train(x=1)
        kubernetes.use_secret_as_env(first, secret_name, {"K": "K"})
        second = register(model=first.output)
        kubernetes.use_secret_as_env(second, first.output, {"K": "K"})

    paths = {"full": where / "full.yaml", "runtime": where / "runtime.yaml"}
    compiler.Compiler().compile(full, str(paths["full"]))
    compiler.Compiler().compile(runtime, str(paths["runtime"]))
    return paths


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return _compile_pipelines(tmp_path_factory.mktemp("compiled"))


@pytest.fixture()
def ir(compiled: dict[str, Path]) -> Path:
    return compiled["full"]


def _complete() -> dict[str, Any]:
    """A cluster description (the small form) holding everything ``full`` needs, and no optional extra."""
    return {
        "namespace": "kubeflow",
        "secrets": {"frugalrl-tracking": ["MLFLOW_TRACKING_URI"], "regcred": [".dockerconfigjson"]},
        "config_maps": {"frugalrl-config": ["CONFIG"]},
        "service_accounts": ["frugalrl-pipeline"],
        "node_labels": [{"cloud.google.com/gke-nodepool": "cpu-pool"}, dict(GPU_POOL)],
        "node_taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}, {"key": "dedicated", "value": "ml",
                                                                             "effect": "NoSchedule"}],
        "gpu_resources": ["nvidia.com/gpu"],
        "images": [IMAGE],
    }  # fmt: skip


def _write(path: Path, data: Any) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``frugalrl pipeline check ARGS`` in-process: (exit code, stdout, stderr)."""
    try:
        main(["pipeline", "check", *args])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _missing_lines(out: str) -> list[str]:
    return [line.strip().removeprefix("missing: ") for line in out.splitlines() if line.strip().startswith("missing:")]


# ------------------------------------------------------------------ the listing


def test_the_listing_names_every_need_with_the_steps_that_need_it(ir, capsys):
    code, out, err = _check(capsys, str(ir))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "pipeline preflight-test: 3 steps: exec-register, exec-train, exec-train-2"
    for heading in ("Secrets:", "ConfigMaps:", "Service account:", "Node pools:", "GPUs:", "Tolerations:", "Images:",
                    "Image pull secrets:"):  # fmt: skip
        assert heading in lines
    expected = [
        "secret frugalrl-tracking: MLFLOW_TRACKING_URI (required), MLFLOW_TRACKING_TOKEN (optional) — needed by "
        "2 steps: exec-register, exec-train",
        "secret frugalrl-tuning (optional): OPTUNA_STORAGE (optional) — needed by 1 step: exec-train",
        "configmap frugalrl-config: CONFIG (required) — needed by 1 step: exec-train",
        "serviceaccount frugalrl-pipeline — runs start as it (KFP sets it per run; --service-account names another)",
        "node labels cloud.google.com/gke-nodepool=cpu-pool — needed by 1 step: exec-register",
        # the ParallelFor's step (exec-train-2) resolves through its loop DAG's input to the same default
        "node labels cloud.google.com/gke-nodepool=gpu-pool (pipeline parameter gpu_node_selector) — needed by "
        "2 steps: exec-train, exec-train-2",
        "nvidia.com/gpu: 1 per pod — needed by 1 step: exec-train",
        "toleration dedicated=ml (Equal, NoSchedule) — needed by 1 step: exec-register",
        "toleration nvidia.com/gpu (Exists, NoSchedule) (pipeline parameter gpu_toleration) — needed by 2 steps: "
        "exec-train, exec-train-2",
        f"image {IMAGE} — needed by 3 steps: exec-register, exec-train, exec-train-2",
        "secret regcred — needed by 1 step: exec-train",
    ]
    assert [line for line in lines if line.startswith("  ")] == [f"  {line}" for line in expected]


def test_requirements_split_required_and_optional_keys(ir):
    req = preflight.requirements(ir, "runner")
    tracking = next(s for s in req.secrets if s.name == "frugalrl-tracking")
    keys = {k.name: k for k in tracking.keys}
    assert keys["MLFLOW_TRACKING_URI"].required_by == ("exec-register", "exec-train")
    assert (keys["MLFLOW_TRACKING_TOKEN"].required_by, keys["MLFLOW_TRACKING_TOKEN"].optional_for) == (
        (),
        ("exec-train",),
    )
    tuning = next(s for s in req.secrets if s.name == "frugalrl-tuning")
    assert (tuning.required_by, tuning.optional_for) == ((), ("exec-train",))
    assert req.service_account == "runner"
    assert req.unresolved == ()


def test_values_only_a_run_knows_are_listed_not_checked(compiled, tmp_path, capsys):
    code, out, _ = _check(capsys, str(compiled["runtime"]), "--cluster", str(_write(tmp_path / "c.yaml", _complete())))
    assert code == 0, out
    assert "Set when the run starts (not checked):" in out
    assert "secret name of exec-train: set when the run starts (empty in the pipeline)" in out
    assert "secret name of exec-register: set when the run starts (another step's output)" in out
    assert "cluster: everything the pipeline needs is there" in out


def test_the_service_account_option_is_the_one_listed_and_checked(ir, tmp_path, capsys):
    cluster = _write(tmp_path / "c.yaml", _complete())
    code, out, _ = _check(capsys, str(ir), "--cluster", str(cluster), "--service-account", "pipeline-runner")
    assert "serviceaccount pipeline-runner — runs start as it" in out
    assert code == 1
    assert _missing_lines(out) == [
        "service account pipeline-runner not found in namespace kubeflow; "
        "create it: kubectl -n kubeflow create serviceaccount pipeline-runner"
    ]


# ------------------------------------------------------------------ the small cluster description


def test_a_complete_cluster_passes(ir, tmp_path, capsys):
    code, out, err = _check(capsys, str(ir), "--cluster", str(_write(tmp_path / "c.yaml", _complete())))
    assert (code, err) == (0, "")
    assert out.splitlines()[-1] == "cluster: everything the pipeline needs is there"
    assert "missing" not in out and "note:" not in out
    # the optional key and the optional secret are absent from the cluster, and not reported
    assert "MLFLOW_TRACKING_TOKEN" not in out.split("Image pull secrets:")[1]
    assert "frugalrl-tuning" not in out.split("Image pull secrets:")[1]


def _drop_key(store: str, name: str, key: str) -> Callable[[dict], None]:
    return lambda c: c[store][name].remove(key)


REMOVALS: dict[str, tuple[Callable[[dict], None], str]] = {
    "secret key": (
        _drop_key("secrets", "frugalrl-tracking", "MLFLOW_TRACKING_URI"),
        "secret frugalrl-tracking has no key MLFLOW_TRACKING_URI (required by 2 steps: exec-register, exec-train); "
        "add it: kubectl -n kubeflow patch secret frugalrl-tracking --type merge "
        """-p '{"stringData":{"MLFLOW_TRACKING_URI":"..."}}'""",
    ),
    "secret": (
        lambda c: c["secrets"].pop("frugalrl-tracking"),
        "secret frugalrl-tracking not found (required by 2 steps: exec-register, exec-train); "
        "create it: kubectl -n kubeflow create secret generic frugalrl-tracking --from-literal=MLFLOW_TRACKING_URI=...",
    ),
    "configmap key": (
        _drop_key("config_maps", "frugalrl-config", "CONFIG"),
        "configmap frugalrl-config has no key CONFIG (required by 1 step: exec-train); add it: kubectl -n kubeflow "
        """patch configmap frugalrl-config --type merge -p '{"data":{"CONFIG":"..."}}'""",
    ),
    "configmap": (
        lambda c: c["config_maps"].clear(),
        "configmap frugalrl-config not found (required by 1 step: exec-train); "
        "create it: kubectl -n kubeflow create configmap frugalrl-config --from-literal=CONFIG=...",
    ),
    "service account": (
        lambda c: c["service_accounts"].clear(),
        "service account frugalrl-pipeline not found in namespace kubeflow; "
        "create it: kubectl -n kubeflow create serviceaccount frugalrl-pipeline",
    ),
    "gpu pool": (
        lambda c: c["node_labels"].pop(1),
        "no node carries cloud.google.com/gke-nodepool=gpu-pool (needed by 2 steps: exec-train, exec-train-2); "
        "label a node pool with it, or run with another gpu_node_selector",
    ),
    "cpu pool": (
        lambda c: c["node_labels"].pop(0),
        "no node carries cloud.google.com/gke-nodepool=cpu-pool (needed by 1 step: exec-register); "
        "label a node pool with it",
    ),
    "gpus": (
        lambda c: c.pop("gpu_resources"),
        "no node offers nvidia.com/gpu (GPU steps: 1 step: exec-train); add a GPU node pool with its device plugin",
    ),
    "image pull secret": (
        lambda c: c["secrets"].pop("regcred"),
        "image pull secret regcred not found (needed by 1 step: exec-train); create it: kubectl -n kubeflow create "
        "secret docker-registry regcred --docker-server=... --docker-username=... --docker-password=...",
    ),
    "image": (
        lambda c: c.update(images=["registry.example.com/frugalrl@sha256:" + "b" * 64]),
        f"image {IMAGE} is not among the cluster's images (needed by 3 steps: exec-register, exec-train, "
        "exec-train-2); push it, or add it to images: in the cluster description",
    ),
}


@pytest.mark.parametrize("what", REMOVALS)
def test_removing_one_thing_fails_the_check_naming_it(what, ir, tmp_path, capsys):
    remove, line = REMOVALS[what]
    cluster = _complete()
    remove(cluster)
    code, out, err = _check(capsys, str(ir), "--cluster", str(_write(tmp_path / "c.yaml", cluster)))
    assert (code, err) == (1, "")  # the check failed: not a usage error (2)
    assert "cluster: 1 missing" in out
    assert _missing_lines(out) == [line]


def test_the_image_check_is_skipped_without_images_and_matches_a_digest(ir, tmp_path, capsys):
    cluster = _complete()
    del cluster["images"]
    assert _check(capsys, str(ir), "--cluster", str(_write(tmp_path / "a.yaml", cluster)))[0] == 0
    cluster["images"] = ["mirror.example.com/frugalrl@sha256:" + "a" * 64]  # a mirror of the same digest
    assert _check(capsys, str(ir), "--cluster", str(_write(tmp_path / "b.yaml", cluster)))[0] == 0


def test_names_only_stores_check_presence_not_keys(ir, tmp_path, capsys):
    cluster = _complete()
    cluster["secrets"] = ["frugalrl-tracking", "regcred"]
    cluster["config_maps"] = ["frugalrl-config"]
    code, out, _ = _check(capsys, str(ir), "--cluster", str(_write(tmp_path / "c.yaml", cluster)))
    assert code == 0, out


def test_a_toleration_no_taint_needs_is_a_note_not_a_failure(ir, tmp_path, capsys):
    cluster = _complete()
    cluster["node_taints"] = [{"key": "dedicated", "value": "other", "effect": "NoSchedule"}]  # Equal needs "ml"
    code, out, _ = _check(capsys, str(ir), "--cluster", str(_write(tmp_path / "c.yaml", cluster)))
    assert code == 0
    notes = [line for line in out.splitlines() if line.startswith("note: ")]
    assert [n.split(" matches")[0] for n in notes] == [
        "note: toleration dedicated=ml (Equal, NoSchedule)",
        "note: toleration nvidia.com/gpu (Exists, NoSchedule) (pipeline parameter gpu_toleration)",
    ]


@pytest.mark.parametrize(
    ("taint", "tolerated"),
    [
        ({"key": "nvidia.com/gpu", "effect": "NoSchedule"}, True),
        ({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}, True),  # Exists ignores the value
        ({"key": "nvidia.com/gpu", "effect": "NoExecute"}, False),
        ({"key": "gpu", "effect": "NoSchedule"}, False),
    ],
)
def test_exists_tolerates_a_taint_by_key_and_effect(taint, tolerated, ir):
    req = preflight.requirements(ir, "frugalrl-pipeline")
    gpu = tuple(t for t in req.tolerations if t.key == "nvidia.com/gpu")
    gpu_only = preflight.Requirements(req.pipeline, req.steps, req.service_account, tolerations=gpu)
    assert (preflight.notes(gpu_only, preflight.Cluster(node_taints=(taint,))) == []) is tolerated


# ------------------------------------------------------------------ kubectl's List


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _kubectl_list(namespace: str = "ml-runs", gpus: str = "1") -> dict[str, Any]:
    """What ``kubectl -n ml-runs get nodes,secrets,serviceaccounts,configmaps -o yaml`` prints, trimmed."""

    def meta(name: str, **extra: Any) -> dict[str, Any]:
        return {"name": name, "namespace": namespace, "uid": "0b1c", "resourceVersion": "7", **extra}

    def node(name: str, pool: str, **spec: Any) -> dict[str, Any]:
        labels = {"kubernetes.io/hostname": name, "cloud.google.com/gke-nodepool": pool}
        allocatable = {"cpu": "3920m", "memory": "12Gi", "pods": "110"}
        if pool == "gpu-pool":
            allocatable["nvidia.com/gpu"] = gpus
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}, "spec": spec,
                "status": {"allocatable": allocatable, "capacity": allocatable}}  # fmt: skip

    return {
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"resourceVersion": ""},
        "items": [
            node("cpu-1", "cpu-pool"),
            node("gpu-1", "gpu-pool", taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                                              {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]),
            {"apiVersion": "v1", "kind": "Secret", "metadata": meta("frugalrl-tracking"), "type": "Opaque",
             "data": {"MLFLOW_TRACKING_URI": _b64(TRACKING_URI), "OPTUNA_STORAGE": _b64("postgresql://u:p@db/o")}},
            {"apiVersion": "v1", "kind": "Secret", "metadata": meta("regcred"),
             "type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": _b64('{"auths": {}}')}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("frugalrl-config"), "data": {"CONFIG": "x"}},
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta("frugalrl-pipeline")},
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta("default")},
        ],
    }  # fmt: skip


def test_kubectl_list_of_a_complete_cluster_passes(ir, tmp_path, capsys):
    code, out, err = _check(capsys, str(ir), "--cluster", str(_write(tmp_path / "k.yaml", _kubectl_list())))
    assert (code, err) == (0, "")
    assert out.splitlines()[-1] == "cluster: everything the pipeline needs is there"
    assert TRACKING_URI not in out and _b64(TRACKING_URI) not in out  # only key names are read


def test_kubectl_list_names_what_is_missing_in_its_namespace(ir, tmp_path, capsys):
    listing = _kubectl_list(gpus="0")
    listing["items"][2]["data"].pop("MLFLOW_TRACKING_URI")
    code, out, _ = _check(capsys, str(ir), "--cluster", str(_write(tmp_path / "k.yaml", listing)))
    assert code == 1
    missing = _missing_lines(out)
    assert len(missing) == 2
    assert missing[0].startswith("secret frugalrl-tracking has no key MLFLOW_TRACKING_URI")
    assert "kubectl -n ml-runs patch secret frugalrl-tracking" in missing[0]  # the List's namespace
    assert missing[1].startswith("no node offers nvidia.com/gpu")
    assert "postgresql://" not in out and TRACKING_URI not in out


def test_load_cluster_reads_kubectl_key_names_labels_taints_and_gpus(tmp_path):
    cluster = preflight.load_cluster(_write(tmp_path / "k.yaml", _kubectl_list()))
    assert cluster.namespace == "ml-runs"
    assert cluster.secrets["frugalrl-tracking"] == {"MLFLOW_TRACKING_URI", "OPTUNA_STORAGE"}
    assert cluster.service_accounts == {"frugalrl-pipeline", "default"}
    assert {"cloud.google.com/gke-nodepool": "gpu-pool", "kubernetes.io/hostname": "gpu-1"} in cluster.node_labels
    assert "nvidia.com/gpu" in cluster.node_resources
    assert cluster.images is None


# ------------------------------------------------------------------ bad input: exit 2, one line


def _bad(tmp_path: Path, ir: Path) -> dict[str, tuple[list[str], str]]:
    """Each bad input: (the arguments, a word the one error line must hold)."""
    (tmp_path / "config.yaml").write_text("algo: ppo\nseed: 1\n")
    (tmp_path / "binary.yaml").write_bytes(b"\xff\xfe\x00\x81binary")
    (tmp_path / "broken.yaml").write_text("root: [unclosed\n")
    several = _kubectl_list()
    several["items"][-1]["metadata"]["namespace"] = "default"
    clusters = {
        "unknown keys": {"nodes": []},
        "a list": [{"secrets": {}}],
        "one object": {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}},
        "bad secrets": {"secrets": "frugalrl-tracking"},
        "bad labels": {"node_labels": ["gpu-pool"]},
        "several namespaces": several,
    }
    cases = {
        "missing package": ([str(tmp_path / "nope.yaml")], "not found"),
        "a config, not a pipeline": ([str(tmp_path / "config.yaml")], "not a compiled Kubeflow pipeline"),
        "binary package": ([str(tmp_path / "binary.yaml")], "not a UTF-8 text file"),
        "broken YAML package": ([str(tmp_path / "broken.yaml")], "not valid YAML"),
        "missing cluster": ([str(ir), "--cluster", str(tmp_path / "nope.yaml")], "not found"),
        "binary cluster": ([str(ir), "--cluster", str(tmp_path / "binary.yaml")], "not a UTF-8 text file"),
        "cluster: a config": ([str(ir), "--cluster", str(tmp_path / "config.yaml")], "unknown key 'algo'"),
        "cluster: a pipeline": ([str(ir), "--cluster", str(ir)], "neither a cluster description nor kubectl"),
    }
    says = {"unknown keys": "unknown key 'nodes'", "a list": "neither", "one object": "one Node, not a List",
            "bad secrets": "secrets must be", "bad labels": "node_labels must be",
            "several namespaces": "several namespaces (default, ml-runs)"}  # fmt: skip
    for name, data in clusters.items():
        cases[f"cluster: {name}"] = ([str(ir), "--cluster", str(_write(tmp_path / f"{name}.yaml", data))], says[name])
    return cases


BAD_NAMES = ["missing package", "a config, not a pipeline", "binary package", "broken YAML package",
             "missing cluster", "binary cluster", "cluster: a config", "cluster: a pipeline", "cluster: unknown keys",
             "cluster: a list", "cluster: one object", "cluster: bad secrets", "cluster: bad labels",
             "cluster: several namespaces"]  # fmt: skip


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_input_is_one_line_and_exit_2(name, ir, tmp_path, capsys):
    args, says = _bad(tmp_path, ir)[name]
    code, out, err = _check(capsys, *args)
    assert code == 2
    assert out == ""  # refused before any listing is printed
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and "Traceback" not in err
    assert says in err


def test_every_bad_input_case_is_run(tmp_path, ir):
    assert sorted(_bad(tmp_path, ir)) == sorted(BAD_NAMES)


def test_the_library_imports_no_kfp():
    """Library code never imports kfp: the check runs where only frugalrl is installed."""
    probe = "import sys, frugalrl.ops.preflight; print('kfp' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
