"""The training pipelines (one builder, a pipeline per declared pretraining stage, and the PEFT pipeline)
compile to the graphs ``golden/training_pipelines.json`` holds the shapes of.

After an intended change to a pipeline, rewrite the golden file with
``PYTHONPATH=src:. python -m tests.test_training_pipelines`` and review its diff.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from frugalrl.pipelines.training import build_training_pipeline, peft_pipeline, pipeline_for, training_pipeline
from kfp import compiler

from frugalrl import pretraining
from frugalrl.ops.profiles import Resources

GOLDEN = Path(__file__).parent / "golden" / "training_pipelines.json"
KINDS = ("plain", "pivot", "latent", "peft")


def shape(ir: dict[str, Any]) -> dict[str, Any]:
    """Compiled IR without component code, image or SDK version (those follow components/ and kfp):
    the pipeline's name and parameters, and per task its component, display name, upstream tasks,
    caching and where each input comes from."""

    def source(spec: dict[str, Any]) -> str:
        if "componentInputParameter" in spec:
            return "$" + spec["componentInputParameter"]
        for key, out in (("taskOutputParameter", "outputParameterKey"), ("taskOutputArtifact", "outputArtifactKey")):
            if key in spec:
                return f"{spec[key]['producerTask']}.{spec[key][out]}"
        return json.dumps(spec, sort_keys=True)

    tasks = {}
    for name, task in ir["root"]["dag"]["tasks"].items():
        inputs = {**task.get("inputs", {}).get("parameters", {}), **task.get("inputs", {}).get("artifacts", {})}
        tasks[name] = {
            "component": task["componentRef"]["name"],
            "display": task["taskInfo"]["name"],
            "after": sorted(task.get("dependentTasks", [])),
            "caching": task.get("cachingOptions", {}),
            "inputs": {key: source(spec) for key, spec in sorted(inputs.items())},
        }
    return {
        "pipeline": ir["pipelineInfo"],
        "parameters": ir["root"]["inputDefinitions"]["parameters"],
        "outputs": ir["root"].get("outputDefinitions", {}),
        "tasks": tasks,
    }


def compiled_shape(pipeline: Any, where: Path) -> dict[str, Any]:
    compiler.Compiler().compile(pipeline, str(where))
    # the first document is the graph (the second, the Kubernetes placement, is checked below);
    # a JSON round trip: the golden file's types (tuples, float defaults) compare equal
    ir = next(yaml.safe_load_all(where.read_text()))
    return json.loads(json.dumps(shape(ir)))


@pytest.mark.parametrize("kind", KINDS)
def test_each_variant_compiles_to_its_golden_graph(kind, tmp_path):
    golden = json.loads(GOLDEN.read_text())
    assert compiled_shape(pipeline_for(kind), tmp_path / f"{kind}.yaml") == golden[kind]


def test_each_declared_stage_has_its_pipeline_built_once(tmp_path):
    assert {"pivot", "latent"} <= set(pretraining.stages())
    for kind in pretraining.stages():
        assert pipeline_for(kind) is pipeline_for(kind) and pipeline_for(kind).name == f"frugalrl-train-{kind}"
    assert pipeline_for("plain") is training_pipeline and pipeline_for("peft") is peft_pipeline
    assert pipeline_for("anything else") is training_pipeline  # as before: the plain graph
    # a fresh build is the same graph as the one handed out
    fresh = compiled_shape(build_training_pipeline(pretraining.stage("pivot")), tmp_path / "fresh.yaml")
    assert fresh == compiled_shape(pipeline_for("pivot"), tmp_path / "named.yaml")


@pytest.mark.parametrize("kind", KINDS)
def test_every_step_of_a_training_pipeline_is_placed_on_the_cpu_pool(kind, tmp_path):
    """Its config is a run-time parameter, so no step can know it wants a GPU: collection, pretraining and
    training take the CPU class, evaluation and registration the light one, all with the tracking Secret."""
    where = tmp_path / f"{kind}.yaml"
    compiler.Compiler().compile(pipeline_for(kind), str(where))
    ir, platform = yaml.safe_load_all(where.read_text())
    executors = ir["deploymentSpec"]["executors"]
    placed = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert set(placed) == set(executors)
    default = Resources()
    for name, executor in executors.items():
        light = name.removeprefix("exec-").rstrip("-0123456789") in {"evaluate", "register"}
        expected = default.light if light else default.cpu
        resources = executor["container"]["resources"]
        assert "accelerator" not in resources and "nodeSelector" not in placed[name], name
        assert (resources["resourceCpuRequest"], resources["resourceMemoryLimit"]) == (
            expected.cpu_request, expected.memory_limit), name  # fmt: skip
        assert int(placed[name]["activeDeadlineSeconds"]) == expected.timeout_s, name
        uri = [e for e in placed[name]["secretAsEnv"] if e["keyToEnv"][0]["envVar"] == "MLFLOW_TRACKING_URI"]
        assert [(e["secretName"], e["optional"]) for e in uri] == [("frugalrl-tracking", False)], name


if __name__ == "__main__":  # rewrite the golden file (see the module docstring)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        shapes = {kind: compiled_shape(pipeline_for(kind), Path(tmp) / f"{kind}.yaml") for kind in KINDS}
    GOLDEN.write_text(json.dumps(shapes, indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
