"""``frugalrl pipeline``: compile a Kubeflow pipeline, submit or schedule it on a cluster, run it locally.

The pipelines (``pipelines/``, ``components/`` in the repository) install as ``frugalrl.pipelines`` and
``frugalrl.components`` with the ``pipelines`` extra (pyproject.toml), so no checkout has to be on ``sys.path``.
"""

from __future__ import annotations

import importlib
import tempfile
from pathlib import Path
from typing import Annotated
from urllib.parse import urlparse

import typer
import yaml

from frugalrl.cli.options import SetOption
from frugalrl.errors import FrugalError
from frugalrl.ops import preflight  # reads the IR as YAML: no kfp import

pipeline_app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Kubeflow pipelines: compile, check, submit, schedule, run here."
)


def _pipelines():  # noqa: ANN202 - returns the frugalrl.pipelines.local module
    """``frugalrl.pipelines.local``, imported when a command runs, not with this module: it loads kfp, which
    the other commands do not need (and a core install, without the pipelines extra, does not have)."""
    return importlib.import_module("frugalrl.pipelines.local")


ImageOption = Annotated[
    str | None, typer.Option("--image", help="The image every step runs, e.g. HOST:PORT/frugalrl@sha256:...")
]
CudaImageOption = Annotated[
    str | None, typer.Option("--cuda-image", help="The image of a profile's GPU steps (the cuda build).")
]
UnpinnedOption = Annotated[
    bool, typer.Option("--allow-unpinned", help="Let an image without registry or digest through (dev clusters).")
]


@pipeline_app.command("compile")
def pipeline_compile(
    output: Annotated[Path, typer.Option("-o", "--output", help="IR YAML file to write.")] = Path("pipeline.yaml"),
    config: Annotated[Path | None, typer.Option("--config", "-c", help="Compile the graph this config needs.")] = None,
    profile: Annotated[
        str | None, typer.Option("--profile", help="The production DAG of a profile: quick, full, or a YAML path.")
    ] = None,
    image: ImageOption = None,
    cuda_image: CudaImageOption = None,
    allow_unpinned: UnpinnedOption = False,
) -> None:
    """Compile a pipeline to Kubeflow IR YAML for a cluster: a config's training pipeline, or a profile's DAG.

    Every step takes MLflow's address from the Kubernetes Secret the profile names and names the image
    pushed last from this checkout by registry and digest, unless --image / --cuda-image name others."""
    if config is not None and profile is not None:
        raise FrugalError("pass --config or --profile, not both")
    _check_output_file(output)
    for line in _pipelines().compile_pipeline(output, config, profile, image, cuda_image, allow_unpinned):
        typer.echo(line)
    typer.echo(f"compiled: {output}")


def _check_output_file(output: Path) -> None:
    """The compiled IR is one YAML file: a folder or another suffix is refused before anything is built."""
    if output.is_dir():
        raise FrugalError(f"-o {output} is a folder; give the file to write, e.g. -o {output / 'pipeline.yaml'}")
    if output.suffix not in (".yaml", ".yml"):
        raise FrugalError(f"-o {output}: the compiled pipeline is YAML; give a path ending in .yaml")


def _compiled(config: Path | None, profile: str | None, package: Path | None, where: Path,
              images: tuple[str | None, str | None, bool]) -> Path:  # fmt: skip
    """The IR to send: ``package`` as it is, or ``config``/``profile`` compiled with ``images`` (--image,
    --cuda-image, --allow-unpinned) to ``where``."""
    if sum(x is not None for x in (config, profile, package)) != 1:
        raise FrugalError("pass exactly one of --config, --profile or --package")
    if package is not None:
        if not package.is_file():
            raise FrugalError(f"--package {package} not found; compile one with `frugalrl pipeline compile`")
        if any(images[:2]) or images[2]:
            raise FrugalError("--package is compiled already: its images are those it names; drop --image, "
                              "--cuda-image and --allow-unpinned, or compile again")  # fmt: skip
        return package
    _pipelines().compile_pipeline(where, config, profile, *images)
    return where


def _parameters(items: list[str] | None) -> dict:
    params = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise FrugalError(f"--param {item!r}: expected KEY=VALUE, e.g. --param eval_episodes=20")
        params[key] = yaml.safe_load(value)
    return params


ParamOption = Annotated[list[str] | None, typer.Option("--param", help="A pipeline parameter: KEY=VALUE")]
AccountOption = Annotated[
    str, typer.Option("--service-account", help="The identity the steps run as (infra/kfp/rbac.yaml declares it).")
]
HostOption = Annotated[str, typer.Option("--host", help="The KFP API server, e.g. http://localhost:8080")]


def _check_host(host: str) -> None:
    parsed = urlparse(host)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise FrugalError(f"--host {host!r} is not an http(s) URL of the KFP API; e.g. --host http://localhost:8080")


@pipeline_app.command("submit")
def pipeline_submit(
    host: HostOption,
    config: Annotated[Path | None, typer.Option("--config", "-c")] = None,
    profile: Annotated[str | None, typer.Option("--profile")] = None,
    package: Annotated[Path | None, typer.Option("--package", help="An already compiled IR YAML.")] = None,
    name: Annotated[str, typer.Option(help="The run's display name.")] = "frugalrl",
    params: ParamOption = None,
    service_account: AccountOption = "frugalrl-pipeline",
    image: ImageOption = None,
    cuda_image: CudaImageOption = None,
    allow_unpinned: UnpinnedOption = False,
) -> None:
    """Start one run on a Kubeflow Pipelines cluster (compiles first unless --package)."""
    _check_host(host)
    _pipelines()  # kfp loads only when a pipeline command runs
    from frugalrl.pipelines.remote import submit

    with tempfile.TemporaryDirectory() as tmp:
        spec = _compiled(config, profile, package, Path(tmp) / "p.yaml", (image, cuda_image, allow_unpinned))
        reply = submit(host, spec, name, _parameters(params), service_account)
    typer.echo(f"run {reply['run_id']} submitted to {host}")


@pipeline_app.command("schedule")
def pipeline_schedule(
    host: HostOption,
    cron: Annotated[str, typer.Option("--cron", help="Cron expression, 5 or 6 fields (KFP: seconds first).")],
    config: Annotated[Path | None, typer.Option("--config", "-c")] = None,
    profile: Annotated[str | None, typer.Option("--profile")] = None,
    package: Annotated[Path | None, typer.Option("--package", help="An already compiled IR YAML.")] = None,
    name: Annotated[str, typer.Option(help="The recurring run's display name.")] = "frugalrl-scheduled",
    params: ParamOption = None,
    service_account: AccountOption = "frugalrl-pipeline",
    image: ImageOption = None,
    cuda_image: CudaImageOption = None,
    allow_unpinned: UnpinnedOption = False,
) -> None:
    """Create a recurring run on a Kubeflow Pipelines cluster."""
    _check_host(host)
    _pipelines()
    from frugalrl.pipelines.remote import kfp_cron, schedule

    kfp_cron(cron)  # a bad expression fails before anything is compiled or sent
    with tempfile.TemporaryDirectory() as tmp:
        spec = _compiled(config, profile, package, Path(tmp) / "p.yaml", (image, cuda_image, allow_unpinned))
        reply = schedule(host, spec, name, _parameters(params), cron, service_account)
    typer.echo(f"recurring run {reply['recurring_run_id']} ({kfp_cron(cron)}) created on {host}")


@pipeline_app.command("run")
def pipeline_run(
    config: Annotated[Path | None, typer.Option("--config", "-c", help="Experiment YAML.")] = None,
    profile: Annotated[str | None, typer.Option("--profile", help="Run a profile's production DAG instead.")] = None,
    overrides: SetOption = None,
    model_name: Annotated[str | None, typer.Option(help="Registered model name; default <env>-policy.")] = None,
    root: Annotated[Path, typer.Option(help="Where kfp.local keeps step outputs.")] = Path("pipeline_runs"),
    isolated: Annotated[
        bool, typer.Option("--isolated", help="Run each stage as a cluster would: only its declared inputs.")
    ] = False,
    runner: Annotated[
        str, typer.Option("--runner", help="subprocess, or docker: every stage in a container of the step image.")
    ] = "subprocess",
    image: ImageOption = None,
) -> None:
    """Run a pipeline on this machine (kfp.local, MLflow sqlite by default)."""
    if (config is None) == (profile is None):
        raise FrugalError("pass --config FILE (a training pipeline) or --profile NAME (the production DAG)")
    if profile is not None and (overrides or model_name):
        raise FrugalError("--set and --model-name apply to --config; a profile sets them in its YAML (profiles/)")
    pipelines = _pipelines()
    if profile is not None:
        for line in pipelines.run_profile_local(profile, root, isolated=isolated, runner=runner, image=image):
            typer.echo(line)
        return
    result = pipelines.run_local(config, overrides or [], model_name=model_name, root=root, isolated=isolated,
                                 runner=runner, image=image)  # fmt: skip
    for line in result.lines():
        typer.echo(line)


@pipeline_app.command("check")
def pipeline_check(
    package: Annotated[Path, typer.Argument(help="A compiled pipeline: the IR YAML of `frugalrl pipeline compile`.")],
    cluster: Annotated[
        Path | None,
        typer.Option(
            "--cluster",
            help="The cluster: a description (see frugalrl.ops.preflight) or the output of "
            "kubectl -n NAMESPACE get nodes,secrets,serviceaccounts,configmaps -o yaml.",
        ),
    ] = None,
    service_account: Annotated[
        str, typer.Option("--service-account", help="The service account runs start as (KFP sets it per run).")
    ] = "frugalrl-pipeline",
) -> None:
    """List what a compiled pipeline needs from its cluster; with --cluster, exit 1 naming what is missing."""
    needs = preflight.requirements(package, service_account)
    described = None if cluster is None else preflight.load_cluster(cluster)  # bad input fails before any output
    for line in preflight.format_requirements(needs):
        typer.echo(line)
    if described is None:
        return
    for line in preflight.notes(needs, described):
        typer.echo(f"note: {line}")
    lacking = preflight.missing(needs, described)
    if not lacking:
        typer.echo("cluster: everything the pipeline needs is there")
        return
    typer.echo(f"cluster: {len(lacking)} missing")
    for line in lacking:
        typer.echo(f"  missing: {line}")
    raise typer.Exit(1)
