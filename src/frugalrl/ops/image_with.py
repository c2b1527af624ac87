"""``frugalrl image build --with``: the step image plus a team's own packages, as one thin layer.

Each ``--with`` item is one of:

- a folder with ``pyproject.toml`` or ``setup.py``: a package, ``pip install``-ed into the image's venv;
- a ``.whl`` file: installed the same way;
- a ``.py`` file, or a folder of modules without packaging metadata (what a user puts on ``PYTHONPATH``):
  copied to ``/opt/frugalrl-with/modules``, which is on the image's ``PYTHONPATH``;
- anything else: a pip requirement (``mypkg==1.2``), installed from the index the build reaches.

The layer goes on the last build of the flavour (``frugalrl image build``), never on an earlier layer
of its own, and records its items in the image's label ``org.frugalrl.with`` and its environment
(``FRUGALRL_IMAGE_WITH``), which every run in it tags as ``frugalrl.image_with`` (the audit record).
The new image becomes the flavour's last build: ``image push``, ``pipeline compile`` and
``pipeline run --runner docker`` use it.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from frugalrl.ops.image_context import pip_setting
from frugalrl.ops.images import ImageError, ImageRecord, docker_client, load_record, save_record, stream_build
from frugalrl.tracking.provenance import IMAGE_WITH_ENV as WITH_ENV

WITH_ROOT = "/opt/frugalrl-with"
MODULES = f"{WITH_ROOT}/modules"
WITH_LABEL = "org.frugalrl.with"
SKIPPED = {".git", "__pycache__", ".venv", "venv", ".mypy_cache", ".pytest_cache", ".ruff_cache", "build", "dist"}


def classify(item: str) -> tuple[str, Path | None]:
    """(kind, path) of one ``--with`` item: ``package``, ``wheel``, ``modules`` or ``requirement`` (path None)."""
    path = Path(item).expanduser()
    if path.is_dir():
        packaged = (path / "pyproject.toml").is_file() or (path / "setup.py").is_file()
        return ("package" if packaged else "modules"), path.resolve()
    if path.is_file():
        if path.suffix == ".whl":
            return "wheel", path.resolve()
        if path.suffix == ".py":
            return "modules", path.resolve()
        raise ImageError(f"--with {item}: a file to add is a .py module or a .whl; a folder, a package")
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        Requirement(item)
    except InvalidRequirement:
        raise ImageError(
            f"--with {item!r}: no such file or folder, and not a pip requirement (e.g. mypkg==1.2); "
            "pass a package folder, a .whl, a .py module, a folder of modules or a requirement"
        ) from None
    return "requirement", None


def _add_tree(tar: tarfile.TarFile, source: Path, arcname: str) -> None:
    """``source`` (a file or a folder, less caches and VCS folders) into the context at ``arcname``."""
    if source.is_file():
        tar.add(source, arcname=arcname, recursive=False)
        return
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if path.is_file() and not SKIPPED & set(relative.parts) and path.suffix != ".pyc":
            tar.add(path, arcname=f"{arcname}/{relative.as_posix()}", recursive=False)


def dockerfile(base: str, kinds: list[tuple[str, str]], record: str, cert: bool) -> str:
    """The layer's Dockerfile: ``kinds`` are (kind, what pip installs or where the modules went)."""
    installs = [target for kind, target in kinds if kind in ("package", "wheel", "requirement")]
    lines = [f"FROM {base}", "USER 0", f"COPY with/ {WITH_ROOT}/"]
    if installs:
        export = f"export PIP_CERT={WITH_ROOT}/pip-ca.pem; " if cert else ""
        quoted = " ".join(json.dumps(target) for target in installs)
        lines.append(f"RUN {export}PIP_DISABLE_PIP_VERSION_CHECK=1 pip install --no-cache-dir {quoted} && pip check")
    lines += [
        f"ENV PYTHONPATH={MODULES} {WITH_ENV}={json.dumps(record)}",
        f"LABEL {WITH_LABEL}={json.dumps(record)}",
        "USER 1000",
    ]
    return "\n".join(lines) + "\n"


def build_with(repo: Path, items: list[str], flavor: str = "cpu",
               progress: Callable[[str], None] = print) -> ImageRecord:  # fmt: skip
    """The last ``flavor`` build of ``repo`` with ``items`` added; its record replaces the flavour's."""
    classified = [(item, *classify(item)) for item in items]  # every item checked before the daemon is asked
    repo = repo.resolve()
    last = load_record(repo, flavor)
    if last is None:
        raise ImageError(f"no {flavor} step image was built from this checkout; run `frugalrl image build` first")
    base = last.with_base or last.tag  # a layer goes on the step image itself, not on an earlier layer
    client = docker_client()
    import docker

    try:
        base_id = client.images.get(base).id
    except docker.errors.ImageNotFound:
        raise ImageError(f"the step image {base} is no longer in the daemon; run `frugalrl image build`") from None
    record = json.dumps([item for item, _, _ in classified])
    cert = next((Path(p) for p in pip_setting("cert") if Path(p).is_file()), None)
    kinds: list[tuple[str, str]] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="frugalrl-with-") as tmp:
        context = Path(tmp) / "context.tar"
        with tarfile.open(context, "w") as tar:
            folder = tarfile.TarInfo("with")  # always there: COPY with/ needs it when only requirements are given
            folder.type, folder.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(folder)
            for number, (item, kind, path) in enumerate(classified):
                if kind == "modules":
                    assert path is not None
                    _add_tree(tar, path, f"with/modules/{path.name}" if path.is_file() else "with/modules")
                    kinds.append((kind, MODULES))
                elif kind in ("package", "wheel"):
                    assert path is not None
                    name = f"item{number}" if kind == "package" else f"item{number}/{path.name}"
                    _add_tree(tar, path, f"with/{name}")
                    kinds.append((kind, f"{WITH_ROOT}/{name}"))
                else:
                    kinds.append((kind, item))
            if cert is not None:
                tar.add(cert, arcname="with/pip-ca.pem")
            text = dockerfile(base_id, kinds, record, cert is not None).encode()
            info = tarfile.TarInfo("Dockerfile.with")
            info.size, info.mtime = len(text), 0
            tar.addfile(info, io.BytesIO(text))
        digest = hashlib.sha256(context.read_bytes()).hexdigest()[:12]
        tag = f"{base.partition(':')[0]}:{base.partition(':')[2]}-with-{digest}"
        log_path = repo / ".frugalrl" / "image-with.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        progress(f"adding {', '.join(item for item, _, _ in classified)} to {base} as {tag} (log: {log_path})")
        with context.open("rb") as fileobj, log_path.open("w") as log:
            image_id = stream_build(client, fileobj, "Dockerfile.with", tag, {}, log, progress)
    image = client.images.get(image_id)
    built = replace(
        last,
        tag=tag,
        image_id=image.id,
        size_bytes=int(image.attrs.get("Size", 0)),
        build_s=round(time.perf_counter() - started, 1),
        built_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        repository=None,
        digest=None,
        with_base=base,
        with_items=[item for item, _, _ in classified],
    )
    save_record(repo, built)
    client.close()
    return built
