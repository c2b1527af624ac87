"""``frugalrl image``: build the step image from this checkout, push it to a registry."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from frugalrl.cli.pipeline import _pipelines
from frugalrl.errors import FrugalError
from frugalrl.ops.image_with import build_with
from frugalrl.ops.images import DEFAULT_TORCH, build_image, push_image

image_app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="The step image: build it from this checkout, push it."
)


@image_app.command("build")
def image_build(
    flavor: Annotated[str, typer.Option("--flavor", help="cpu (images/Dockerfile.cpu) or cuda.")] = "cpu",
    base: Annotated[
        str | None,
        typer.Option("--base", help="The base image, or debootstrap: Debian's, made here (no registry needed)."),
    ] = None,
    torch_spec: Annotated[str, typer.Option("--torch", help="The torch requirement.")] = DEFAULT_TORCH,
    pip_cert: Annotated[
        Path | None, typer.Option("--pip-cert", help="CA bundle for pip in the build (default: pip's `cert` here).")
    ] = None,
    with_items: Annotated[
        list[str] | None,
        typer.Option(
            "--with",
            help="Add your own code to the last build, as a thin layer (repeatable): a package folder, a .whl, "
            "a .py module, a folder of modules or a pip requirement (docs/own-env.md).",
        ),
    ] = None,
) -> None:
    """Build the step image from this checkout, tagged frugalrl:<version>-<commit>, through the Docker daemon;
    with --with, add your own packages to the last build instead."""
    if with_items:
        if base is not None or torch_spec != DEFAULT_TORCH or pip_cert is not None:
            raise FrugalError("--with adds a layer to the last build: --base, --torch and --pip-cert belong to "
                              "`frugalrl image build` without --with")  # fmt: skip
        record = build_with(_checkout(), with_items, flavor, progress=typer.echo)
    else:
        record = build_image(_checkout(), flavor, base, torch_spec, pip_cert, progress=typer.echo)
    size = f"{record.size_bytes / 1e9:.2f} GB"
    typer.echo(f"built {record.tag} ({record.image_id[:19]}, {size}) in {record.build_s:.0f} s")
    typer.echo(f"push it: frugalrl image push --registry HOST:PORT;  try it: docker run --rm {record.tag} check")


@image_app.command("push")
def image_push(
    registry: Annotated[str, typer.Option("--registry", help="HOST:PORT of the registry, e.g. 127.0.0.1:5000.")],
    flavor: Annotated[str, typer.Option("--flavor", help="Which build to push: cpu or cuda.")] = "cpu",
) -> None:
    """Push the last build to a registry; compiled pipelines then name it by digest."""
    record = push_image(_checkout(), registry, flavor, progress=typer.echo)
    typer.echo(f"pushed: {record.pinned}")


def _checkout() -> Path:
    """The frugalrl checkout the image is built from: the one this frugalrl is installed from (``pip install -e``)."""
    root = Path(_pipelines().__file__).resolve().parent.parent
    if not (root / "images" / "Dockerfile.cpu").is_file():
        raise FrugalError(
            f"the image builds from a frugalrl checkout, and this frugalrl is installed in {root}, not from one; "
            "install it from the checkout with pip install -e ."
        )
    return root
