"""The one artifact resolver: a local path or an MLflow URI in, a local file or directory out.

Every loader that reads a saved file (policy, encoder, evaluator, adapter) or a run's ``run/``
folder goes through ``resolve_artifact``, so there is one place that knows MLflow URIs.

- A local path is not fetched: a directory with ``filename`` set gives ``directory/filename``;
  anything else comes back as given, and the loader that reads it names a missing or foreign
  file in its own words.
- ``runs:/``, ``models:/`` and ``mlflow-artifacts:`` URIs are downloaded (into ``dest`` when
  given). With ``filename``, the first file of that name in the download is returned; with
  ``filename=None``, the downloaded file or directory itself.
- Any other ``scheme:/`` is refused with a one-line error saying which references work.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from frugalrl.errors import TrackingError
from frugalrl.tracking.store import check_tracking

MLFLOW_PREFIXES = ("runs:/", "models:/", "mlflow-artifacts:")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/")  # two letters at least: not a Windows drive


def is_mlflow_uri(reference: str | Path) -> bool:
    """Whether ``reference`` names an MLflow artifact (rather than a local path)."""
    return str(reference).startswith(MLFLOW_PREFIXES)


def resolve_artifact(
    uri_or_path: str | Path,
    filename: str | None,
    what: str,
    fix: str,
    *,
    dest: Path | None = None,
    fetch_error: Callable[[str], str] | None = None,
) -> Path:
    """A local path for ``uri_or_path`` (see the module docstring). Raises ``TrackingError``.

    ``what`` names the artifact and ``fix`` says how to get a good one, in the errors.
    ``fetch_error(reason)`` words a failed download (``reason``: the first line of MLflow's error)
    for callers whose message predates this resolver; the default names ``what`` and ``uri``.
    """
    uri = str(uri_or_path)
    if not is_mlflow_uri(uri):
        scheme = _SCHEME.match(uri)
        if scheme:
            raise TrackingError(
                f"{what} {uri}: unknown scheme {scheme.group(1)}:; pass a local path or an MLflow URI "
                f"({', '.join(MLFLOW_PREFIXES)}); {fix}"
            )
        path = Path(uri)
        return path / filename if filename and path.is_dir() else path
    import mlflow
    import mlflow.artifacts

    mlflow.set_tracking_uri(check_tracking())
    try:
        target = None if dest is None else str(dest)
        local = Path(mlflow.artifacts.download_artifacts(artifact_uri=uri, dst_path=target))
    except Exception as exc:
        reason = (str(exc).splitlines() or [type(exc).__name__])[0]
        default = f"cannot fetch {what} {uri} from MLflow ({reason[:160]}); check the name and alias"
        raise TrackingError(fetch_error(reason) if fetch_error else default) from None
    if filename is None:
        return local
    found = sorted(local.rglob(filename))
    if not found:
        raise TrackingError(f"{uri} holds no {filename}; {fix}")
    return found[0]
