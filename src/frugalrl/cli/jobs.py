"""``frugalrl trainjob`` and ``frugalrl pytorchjob``: render and validate multi-worker training manifests."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from frugalrl.config import read_text_file
from frugalrl.errors import FrugalError
from frugalrl.fusion.pytorchjob import pytorchjob_manifest, validate_manifest
from frugalrl.fusion.trainjob import GPU_POOL_SELECTOR, GPU_TOLERATIONS, trainjob_manifest, validate_trainjob

trainjob_app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Kubeflow Trainer v2 TrainJob manifests for multi-worker training (the default).",
)
pytorchjob_app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Kubeflow Training Operator PyTorchJob manifests (legacy; TrainJob is the default).",
)


def _manifest_out(out: Path | None) -> None:
    """Where a rendered manifest goes: refused in one line before anything is built."""
    if out is not None and (out.is_dir() or not out.parent.is_dir()):
        problem = "is a folder" if out.is_dir() else f"is in {out.parent}, which does not exist"
        raise FrugalError(f"-o {out} {problem}; give a YAML file in an existing folder, e.g. -o job.yaml")


def _write_manifest(manifest: dict, kind: str, out: Path | None) -> None:
    text = yaml.safe_dump(manifest, sort_keys=False)
    if out is None:
        typer.echo(text)
    else:
        out.write_text(text)
        typer.echo(f"valid {kind} written: {out}")


def _validate_file(file: Path, kind: str, validate: Any) -> None:
    """Validate every document of a manifest file as ``kind``; one line with the first problem."""
    command = kind.lower()
    text = read_text_file(file, f"{kind} manifest", f"a file written by frugalrl {command} render")
    try:
        docs = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError:
        raise FrugalError(f"{file}: not valid YAML; fix the syntax") from None
    if not docs:
        raise FrugalError(f"{file}: empty; write a {kind} manifest (frugalrl {command} render makes one)")
    for doc in docs:
        if not isinstance(doc, dict):
            raise FrugalError(f"{file}: a {type(doc).__name__}, not a {kind} manifest (a mapping)")
        validate(doc)
    typer.echo(f"{file}: valid {kind}")


@trainjob_app.command("render")
def trainjob_render(
    name: Annotated[str, typer.Option(help="Job name (DNS-1035 label: starts with a letter).")],
    workers: Annotated[int, typer.Option(min=2, help="Training nodes (spec.trainer.numNodes).")],
    image: Annotated[
        str, typer.Option(help="The frugalrl CUDA image by digest, NAME@sha256:... (frugalrl image push prints it).")
    ],
    gpus_per_node: Annotated[
        int, typer.Option("--gpus-per-node", min=0, max=16, help="GPUs per node, one torchrun process each.")
    ] = 1,
    config_map: Annotated[str, typer.Option(help="ConfigMap holding config.yaml.")] = "frugalrl-train-config",
    output_claim: Annotated[
        str, typer.Option(help="PersistentVolumeClaim (ReadWriteMany) the run directories go to.")
    ] = "frugalrl-runs",
    runtime: Annotated[str, typer.Option(help="The ClusterTrainingRuntime to run on.")] = "torch-distributed",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="YAML file (default: stdout).")] = None,
) -> None:
    """Render (and validate) the TrainJob for multi-worker training on the GPU node pool."""
    _manifest_out(out)
    manifest = trainjob_manifest(
        name, config_map, workers, image, gpus_per_node=gpus_per_node, node_selector=GPU_POOL_SELECTOR,
        tolerations=GPU_TOLERATIONS, output_claim=output_claim, runtime=runtime,
    )  # fmt: skip
    validate_trainjob(manifest)
    _write_manifest(manifest, "TrainJob", out)


@trainjob_app.command("validate")
def trainjob_validate(file: Path) -> None:
    """Validate a TrainJob manifest (the Trainer API's fields, 2+ nodes, image by digest, torchrun); exit 2 if not."""
    _validate_file(file, "TrainJob", validate_trainjob)


@pytorchjob_app.command("render")
def pytorchjob_render(
    name: Annotated[str, typer.Option(help="Job name (DNS label).")],
    workers: Annotated[int, typer.Option(min=2, help="Master + workers.")],
    image: Annotated[str, typer.Option(help="The frugalrl CUDA image.")] = "frugalrl:0.1.0-cuda",
    config_map: Annotated[str, typer.Option(help="ConfigMap holding config.yaml.")] = "frugalrl-train-config",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="YAML file (default: stdout).")] = None,
) -> None:
    """Render (and validate) the legacy PyTorchJob for multi-worker training on the GPU node pool."""
    _manifest_out(out)
    manifest = pytorchjob_manifest(
        name, config_map, workers, image, node_selector=GPU_POOL_SELECTOR, tolerations=GPU_TOLERATIONS
    )
    validate_manifest(manifest)
    _write_manifest(manifest, "PyTorchJob", out)


@pytorchjob_app.command("validate")
def pytorchjob_validate(file: Path) -> None:
    """Validate a PyTorchJob manifest (its fields and every pod template); exit 2 with the first problem."""
    _validate_file(file, "PyTorchJob", validate_manifest)
