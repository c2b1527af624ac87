"""The step image: build it from this checkout, push it to a registry, name it exactly.

Everything goes through the Docker daemon with the docker Python SDK (no ``docker`` binary).
A build sends a context made of the checkout's tracked files plus the *build extras*
(``images/extras/`` in the context only): a CPU torch wheel from pip's ``find-links``, the CA
bundle pip trusts, and the versions CI ran (``constraints/<python>.txt`` of the checkout, the one
``make setup`` installs from) as pip constraints. The image then holds the versions a ``make setup``
environment holds, which is what makes a container step's returns equal a subprocess step's on the
same CPU.

What was built (tag, image ID, size, build time, commit) and, after a push, the registry digest
are kept in ``.frugalrl/image-<flavor>.json`` of the checkout: ``pipeline compile`` and
``pipeline run --runner docker`` name the image from it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from frugalrl import __version__
from frugalrl.errors import FrugalError
from frugalrl.extras import missing_extra
from frugalrl.ops.image_context import (
    FLAVOR_PYTHON,
    git_output,
    local_wheels,
    pinned_versions,
    pip_setting,
    write_context,
)

# What every compiled step names until a compile or run pins another (``frugalrl.pipelines.containers.pinned_image``):
# the tag ``docker build -f images/Dockerfile.cpu -t frugalrl:0.1.0-cpu .`` gives.
DEFAULT_IMAGE = f"frugalrl:{__version__}-cpu"
FLAVORS = {"cpu": "images/Dockerfile.cpu", "cuda": "images/Dockerfile.cuda"}
DEFAULT_TORCH = "torch==2.13.0"
RECORD_DIR = ".frugalrl"
DEBOOTSTRAP_BASE = "frugalrl-base:bookworm"  # what scripts/build_base_image.sh loads
REFERENCE = re.compile(r"^[a-z0-9]+(?:[._/:-][a-z0-9]+)*(?::[\w][\w.-]{0,127})?(?:@sha256:[0-9a-f]{64})?$")


class ImageError(FrugalError):
    """No Docker daemon, a failed build or push, an unreachable registry, a bad image reference."""


@dataclass
class ImageRecord:
    """One build of the step image, and its registry digest once pushed."""

    flavor: str
    tag: str  # frugalrl:<version>-<commit>[-dirty]
    image_id: str  # sha256 of the image's config: the daemon's name for exactly this image
    base: str
    git_commit: str
    git_dirty: bool
    size_bytes: int
    build_s: float
    built_at: str
    repository: str | None = None  # HOST:PORT/frugalrl after a push
    digest: str | None = None  # sha256 of the pushed manifest
    with_base: str | None = None  # ``image build --with``: the step image the layer went on (ops/image_with.py)
    with_items: list[str] | None = None  # and what it added

    @property
    def pinned(self) -> str | None:
        """``HOST:PORT/frugalrl@sha256:...``: the one reference no later push can move."""
        return f"{self.repository}@{self.digest}" if self.repository and self.digest else None

    @property
    def reference(self) -> str:
        """The pushed digest reference when there is one, else the local tag."""
        return self.pinned or self.tag


def docker_client(timeout: int = 600) -> Any:
    """A client of the Docker daemon (``DOCKER_HOST`` or the local socket), or one clear line.

    ``timeout``: seconds for any one API call (a build's is long; a ping's should not be)."""
    try:
        import docker
    except ModuleNotFoundError as exc:  # the pipelines extra's, not the core's
        raise ImageError(missing_extra(exc) or str(exc)) from None
    where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as exc:  # docker raises DockerException or a requests error
        reason = (str(exc).splitlines() or [type(exc).__name__])[0][:120]
        raise ImageError(f"no Docker daemon answers at {where} ({reason}); start dockerd or set DOCKER_HOST") from None
    return client


def daemon_available() -> bool:
    """Whether a Docker daemon answers (for skipping what needs one)."""
    try:
        docker_client(timeout=5).close()
    except ImageError:
        return False
    return True


# -- build, push, record ------------------------------------------------------------------------


def record_path(repo: Path, flavor: str) -> Path:
    """Where the last build of ``flavor`` is recorded: the checkout's ``.frugalrl/``, or ``FRUGALRL_IMAGE_RECORDS``."""
    return Path(os.environ.get("FRUGALRL_IMAGE_RECORDS") or repo / RECORD_DIR) / f"image-{flavor}.json"


def load_record(repo: Path, flavor: str = "cpu") -> ImageRecord | None:
    """The last build of ``flavor`` from this checkout, or ``None`` when there is none."""
    path = record_path(repo, flavor)
    if not path.is_file():
        return None
    try:
        return ImageRecord(**json.loads(path.read_text()))
    except (ValueError, TypeError):
        raise ImageError(f"{path} is not an image record; build again with `frugalrl image build`") from None


def save_record(repo: Path, record: ImageRecord) -> Path:
    path = record_path(repo, record.flavor)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(record), indent=2) + "\n")
    tmp.replace(path)  # whole or not at all
    return path


def _one_line(message: str) -> str:
    return (message.strip().splitlines() or ["(no message)"])[-1][:300]


def build_image(
    repo: Path,
    flavor: str = "cpu",
    base: str | None = None,
    torch_spec: str = DEFAULT_TORCH,
    pip_cert: Path | None = None,
    pin_versions: bool = True,
    progress: Callable[[str], None] = print,
) -> ImageRecord:
    """Build ``images/Dockerfile.<flavor>`` from ``repo``; tag it ``frugalrl:<version>-<commit>``.

    ``base``: the ``BASE_IMAGE`` build argument (default: the Dockerfile's pinned public base);
    ``debootstrap``: the Debian base ``scripts/build_base_image.sh`` makes, for machines without a registry.
    ``progress`` gets each build step as it starts; the daemon's full output goes to
    ``.frugalrl/image-build.log``.
    """
    if flavor not in FLAVORS:
        raise ImageError(f"--flavor {flavor!r}: expected one of {sorted(FLAVORS)}")
    repo = repo.resolve()
    if not (repo / FLAVORS[flavor]).is_file():
        raise ImageError(f"{repo / FLAVORS[flavor]} not found; run from a frugalrl checkout")
    if pip_cert is not None and not pip_cert.is_file():
        raise ImageError(f"--pip-cert {pip_cert}: no such file")
    client = docker_client()
    if base == "debootstrap":
        base = debootstrap_base(repo, progress)
    if base is not None:
        _check_base(client, base)
    commit = (git_output(repo, "rev-parse", "HEAD") or "").strip() or "unknown"
    dirty = bool((git_output(repo, "status", "--porcelain", "--untracked-files=no") or "").strip())
    tag = f"frugalrl:{__version__}-{commit[:12]}{'-dirty' if dirty else ''}"
    if pip_cert is None:
        configured = [Path(p) for p in pip_setting("cert")]
        pip_cert = next((p for p in configured if p.is_file()), None)
    wheels = local_wheels(torch_spec) if flavor == "cpu" else []
    build_args = {"TORCH_SPEC": torch_spec, "GIT_COMMIT": commit, "GIT_DIRTY": str(dirty).lower()}
    if base is not None:
        build_args["BASE_IMAGE"] = base
    if flavor == "cpu" and not wheels:
        progress(f"no {torch_spec} wheel in pip's find-links here: pip takes it from PyTorch's CPU index")
        build_args["PIP_EXTRA_ARGS"] = "--extra-index-url https://download.pytorch.org/whl/cpu"
    log_path = repo / RECORD_DIR / "image-build.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="frugalrl-image-") as tmp:
        context = Path(tmp) / "context.tar"
        constraints = pinned_versions(repo, flavor) if pin_versions else None
        if pin_versions and constraints is None:
            progress(f"no constraints/{FLAVOR_PYTHON[flavor]}.txt in the checkout: the image installs from the ranges")
        size = write_context(repo, context, wheels, pip_cert, constraints)
        progress(f"building {tag} from {FLAVORS[flavor]} (context {size / 2**20:.0f} MiB; log: {log_path})")
        with context.open("rb") as fileobj, log_path.open("w") as log:
            image_id = stream_build(client, fileobj, FLAVORS[flavor], tag, build_args, log, progress)
    build_s = time.perf_counter() - started
    image = client.images.get(image_id)
    record = ImageRecord(flavor, tag, image.id, base or "(the Dockerfile's pinned base)", commit, dirty,
                         int(image.attrs.get("Size", 0)), round(build_s, 1),
                         time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))  # fmt: skip
    save_record(repo, record)
    client.close()
    return record


def debootstrap_base(repo: Path, progress: Callable[[str], None] = print) -> str:
    """Load (making it first when it is not cached) the Debian base; returns its tag."""
    progress(f"base: {DEBOOTSTRAP_BASE} from scripts/build_base_image.sh")
    proc = subprocess.run(["bash", str(repo / "scripts" / "build_base_image.sh"), DEBOOTSTRAP_BASE],
                          capture_output=True, text=True)  # fmt: skip
    if proc.returncode != 0:
        raise ImageError(_one_line(proc.stderr or proc.stdout).removeprefix("build_base_image: "))
    progress(_one_line(proc.stdout))
    return DEBOOTSTRAP_BASE


def _check_base(client: Any, base: str) -> None:
    import docker

    try:
        client.images.get(base)
    except docker.errors.ImageNotFound:
        if base.startswith("frugalrl-base"):
            raise ImageError(f"base image {base} is not loaded; make it: scripts/build_base_image.sh {base}") from None
        # any other base: the daemon pulls it during the build (and says so if it cannot)
    except docker.errors.APIError as exc:
        raise ImageError(f"--base {base}: {_one_line(str(exc))}") from None


# What the daemon says when the base's registry cannot be reached (DNS, TCP, TLS, no route).
_UNREACHABLE_REGISTRY = re.compile(
    r"lookup .*(no such host|server misbehaving|i/o timeout)|dial tcp|TLS handshake timeout|connection refused"
    r"|network is unreachable|failed to resolve source metadata|Client\.Timeout|failed to do request",
    re.IGNORECASE,
)


def build_failure(message: str, log_name: str) -> str:
    """The one line of a failed build; where no registry answered for the base, how to build without one."""
    line = f"the build failed: {_one_line(message)}"
    if _UNREACHABLE_REGISTRY.search(message):
        line += (
            "; no container registry answers from here: build the base locally with "
            "`frugalrl image build --base debootstrap` (or `make image BASE=debootstrap`)"
        )
    return f"{line} (full log: {log_name})"


def stream_build(client: Any, fileobj: Any, dockerfile: str, tag: str, build_args: dict, log: Any,
                  progress: Callable[[str], None]) -> str:  # fmt: skip
    """Send the context and follow the daemon's output; returns the new image's ID."""
    import docker

    image_id = None
    try:
        for chunk in client.api.build(fileobj=fileobj, custom_context=True, dockerfile=dockerfile, tag=tag,
                                      buildargs=build_args, rm=True, forcerm=True, decode=True):  # fmt: skip
            if "stream" in chunk:
                log.write(chunk["stream"])
                log.flush()  # the log is what a user tails while a long step runs
                line = chunk["stream"].strip()
                if line.startswith("Step "):
                    progress(line)
            if "error" in chunk:
                log.write(chunk["error"] + "\n")
                raise ImageError(build_failure(chunk["error"], log.name))
            if "aux" in chunk and "ID" in chunk["aux"]:
                image_id = chunk["aux"]["ID"]
    except docker.errors.APIError as exc:
        raise ImageError(build_failure(str(exc), log.name)) from None
    if image_id is None:
        raise ImageError(f"the daemon reported no image; see {log.name}")
    return image_id


def check_registry(registry: str) -> str:
    """``HOST:PORT`` (or a host name), without a scheme or path; one line otherwise."""
    if "://" in registry or "/" in registry.strip("/") or not re.fullmatch(r"[A-Za-z0-9.-]+(:\d{1,5})?", registry):
        raise ImageError(f"--registry {registry!r}: expected HOST:PORT, e.g. --registry 127.0.0.1:5000")
    return registry


def push_image(repo: Path, registry: str, flavor: str = "cpu", progress: Callable[[str], None] = print) -> ImageRecord:
    """Push the last build of ``flavor`` to ``registry``; its record gains the repository and digest."""
    import docker

    registry = check_registry(registry)
    record = load_record(repo.resolve(), flavor)
    if record is None:
        raise ImageError(f"no {flavor} image was built from this checkout; run `frugalrl image build` first")
    client = docker_client()
    try:
        image = client.images.get(record.image_id)
    except docker.errors.ImageNotFound:
        raise ImageError(f"{record.tag} ({record.image_id[:19]}) is no longer in the daemon; build it again") from None
    repository = f"{registry}/frugalrl"
    version_tag = record.tag.partition(":")[2]
    image.tag(repository, tag=version_tag)
    progress(f"pushing {repository}:{version_tag}")
    digest = None
    try:
        for chunk in client.api.push(repository, tag=version_tag, stream=True, decode=True):
            if "error" in chunk:
                reason = _one_line(chunk["error"])
                raise ImageError(f"push to {registry} failed: {reason}; is a registry serving there?")
            if chunk.get("aux", {}).get("Digest"):
                digest = chunk["aux"]["Digest"]
            elif chunk.get("status") and not chunk.get("progressDetail"):
                progress(f"  {chunk.get('id', '')} {chunk['status']}".rstrip())
    except docker.errors.APIError as exc:
        raise ImageError(f"push to {registry} failed: {_one_line(str(exc))}") from None
    if digest is None:
        raise ImageError(f"the registry at {registry} returned no digest for {repository}:{version_tag}")
    record.repository, record.digest = repository, digest
    save_record(repo.resolve(), record)
    client.close()
    return record


def check_reference(reference: str, option: str = "--image") -> str:
    """An image reference as given to ``option``; one line when it is not one."""
    if not REFERENCE.match(reference):
        example = "127.0.0.1:5000/frugalrl@sha256:..."
        raise ImageError(f"{option} {reference!r} is not an image reference; e.g. {option} {example}")
    return reference


def is_pinned(reference: str) -> bool:
    """Whether a cluster can pull exactly this image: a registry host (``HOST:PORT/`` or a dotted name) and a
    digest. A bare name pulls from whatever registry the node defaults to; a tag can be pushed over."""
    host, slash, _ = reference.partition("/")
    from_registry = bool(slash) and ("." in host or ":" in host or host == "localhost")
    return from_registry and "@sha256:" in reference and bool(REFERENCE.match(reference))


def digest_of(reference: str, record: ImageRecord | None = None) -> str:
    """What a run records as its image digest: the ``@sha256:`` part, else the local image ID."""
    if "@sha256:" in reference:
        return reference.partition("@")[2]
    if record is not None and reference == record.tag:
        return record.image_id
    return "unpinned"


def require_local_image(reference: str) -> None:
    """One line unless the daemon holds ``reference`` (kfp.local would try to pull it)."""
    import docker

    client = docker_client()
    try:
        client.images.get(reference)
    except docker.errors.ImageNotFound:
        raise ImageError(f"image {reference} is not in the Docker daemon; build it (`frugalrl image build`) "
                         "or pull it") from None  # fmt: skip
    except docker.errors.APIError as exc:
        raise ImageError(f"image {reference}: {_one_line(str(exc))}") from None
    finally:
        client.close()
