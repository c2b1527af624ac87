"""The MLflow tracking store: where it is, and whether it answers before any work starts.

The tracking URI comes from ``MLFLOW_TRACKING_URI``; without it, ``sqlite:///mlflow.db`` in
the working directory (made absolute, so pipeline steps in other directories share it).
``check_tracking`` fails fast with a one-line ``TrackingError`` before any training starts.
"""

from __future__ import annotations

import base64
import os
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from frugalrl.credentials import shown
from frugalrl.errors import TrackingError

# A compiled pipeline names its tracking Secret here (pipelines.cluster), so a step can say what is missing.
TRACKING_SECRET_ENV = "FRUGALRL_TRACKING_SECRET"
# What every pod of a KFP run has (its driver sets it) and no other process does. Not KUBERNETES_SERVICE_HOST:
# every pod has that, a notebook server with a persistent disk included, where a local store is fine.
IN_CLUSTER_ENV = ("KFP_POD_NAME",)


def in_cluster() -> bool:
    """True inside a pipeline step's pod on a cluster: its disk goes with the pod, so no store may live there."""
    return any(os.environ.get(name) for name in IN_CLUSTER_ENV)


def tracking_uri() -> str:
    """``MLFLOW_TRACKING_URI``; without it, ``mlflow.db`` in the working directory, except in a cluster's pod,
    where a local store would vanish with the pod: there a missing or local URI is a one-line ``TrackingError``."""
    uri = os.environ.get("MLFLOW_TRACKING_URI", "").strip()
    if in_cluster() and not uri.startswith(("http://", "https://", "postgresql", "mysql", "databricks")):
        secret = os.environ.get(TRACKING_SECRET_ENV) or "frugalrl-tracking"
        found = f"is {shown(uri)}, a store on the pod's disk" if uri else "is not set"
        raise TrackingError(
            f"this step runs in a Kubernetes pod and MLFLOW_TRACKING_URI {found}, which is lost with the pod; "
            f"create the Secret {secret} with key MLFLOW_TRACKING_URI (your MLflow server) in the pipeline's "
            "namespace (infra/kfp)"
        )
    if uri:
        return uri
    return f"sqlite:///{Path.cwd().resolve() / 'mlflow.db'}"


def health_request(uri: str) -> urllib.request.Request:
    """The server's ``/health`` request. A URI with credentials (``http://user:PASSWORD@host``) is sent to the host
    alone, the credentials as HTTP Basic auth, as MLflow's own client does: urllib cannot open such a URL."""
    parts = urllib.parse.urlsplit(uri.rstrip("/"))
    headers = {}
    if parts.username is not None:
        pair = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    netloc = parts.hostname or ""
    netloc = f"[{netloc}]" if ":" in netloc else netloc
    netloc += f":{parts.port}" if parts.port else ""
    bare = urllib.parse.urlunsplit((parts.scheme, netloc, f"{parts.path}/health", "", ""))
    return urllib.request.Request(bare, headers=headers)


def check_tracking(uri: str | None = None, timeout_s: float = 5.0) -> str:
    """Make sure the tracking store answers; return the URI. Raises ``TrackingError``."""
    uri = uri or tracking_uri()
    if uri.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(health_request(uri), timeout=timeout_s) as response:
                if response.status != 200:
                    raise TrackingError(
                        f"MLflow server {shown(uri)} answered HTTP {response.status} on /health; check the server"
                    )
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise TrackingError(
                f"MLflow server {shown(uri)} is unreachable ({reason}); start it or unset MLFLOW_TRACKING_URI "
                "to use the local sqlite store"
            ) from None
    elif uri.startswith("sqlite:///"):
        db = Path(uri.removeprefix("sqlite:///"))
        if not db.is_absolute():
            db = Path.cwd() / db
        folder = db.parent
        if db.is_dir():
            raise TrackingError(f"MLflow store {uri}: {db} is a directory, not a database; fix MLFLOW_TRACKING_URI")
        if db.exists() and not os.access(db, os.R_OK | os.W_OK):
            raise TrackingError(f"MLflow store {uri}: {db} is not writable; fix its permissions or MLFLOW_TRACKING_URI")
        if not folder.is_dir() or not os.access(folder, os.W_OK):
            raise TrackingError(
                f"MLflow store {uri}: folder {folder} is missing or not writable; fix MLFLOW_TRACKING_URI"
            )
    elif uri.startswith(("postgresql", "mysql")) and (silence := database_silence(uri, timeout_s)):
        raise TrackingError(
            f"MLflow store {shown(uri)} does not answer ({silence}); start the database or fix MLFLOW_TRACKING_URI"
        )
    # file:, databricks: the mlflow client reports these itself on first use
    return uri


def database_silence(uri: str, timeout_s: float) -> str | None:
    """Why a database URL (``postgresql...``, ``mysql...``) gets no connection within ``timeout_s``, shown
    without its password; None when it connects.

    MLflow's first use of such a store retries for about 110 s (warnings on every try) before its
    error, and a connection that a proxy accepts but no database answers waits longer still. One
    connection with the driver's own ``connect_timeout`` is what MLflow or Optuna would try first, bounded.
    """
    from sqlalchemy import create_engine
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    try:
        engine = create_engine(uri, connect_args={"connect_timeout": max(1, round(timeout_s))})
    except (ArgumentError, ImportError) as exc:
        return shown(str(exc).strip().splitlines()[0])[:200]
    try:
        with engine.connect():
            return None
    except SQLAlchemyError as exc:
        return shown(str(getattr(exc, "orig", None) or exc).strip().splitlines()[0])[:200]
    finally:
        engine.dispose()


def registry_client() -> Any:
    """An MLflow client of the checked tracking store (the registry lives there too)."""
    import mlflow
    from mlflow import MlflowClient

    mlflow.set_tracking_uri(check_tracking())
    return MlflowClient()
