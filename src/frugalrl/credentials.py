"""Credentials never enter recorded data.

A password in a URL (``postgresql://frugal:PASSWORD@host/db``), a secret query parameter
(``?token=...``, S3's ``X-Amz-Signature=...``) or the value of a secret-named key is replaced by
``***`` as a config is read (``frugalrl.config.validate_config``) and wherever the pipelines pass
config text on. Everything a run records is made from that redacted config: MLflow params and
tags, ``config.yaml``, ``policy.pt`` and ``checkpoint.pt``, the audit record, compiled pipelines.
The config hash is computed over it too, so a resume or an audit matches without the secret, and
a config that holds none keeps its hash.

The real value travels by environment only: each redacted URL is remembered in this process's
environment under ``FRUGALRL_CREDENTIAL_<digest of the redacted URL>``, which the steps of a local
pipeline inherit (subprocesses, and containers, which get every ``FRUGALRL_*`` variable). Where
a secret is used (today: the Optuna storage), ``reveal`` turns the redacted text back
into the real one; in a process that never saw the secret (a cluster's pod, a later resume) it
comes from the variable the caller names (``OPTUNA_STORAGE``, set from a Kubernetes Secret), and
else the error says to set it.
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Any

from frugalrl.errors import ConfigError

REDACTED = "***"
ENV_PREFIX = "FRUGALRL_CREDENTIAL_"

# scheme://user:PASSWORD@host: the password up to the first "@" (an "@" inside it must be %40). One slash
# too: a URL passed where a file was expected comes back from pathlib as scheme:/user:PASSWORD@host.
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*:/{1,2}[^:/@\s'\"]*:)(?P<secret>[^@\s'\"]+)(?P<at>@)")
_SECRET_NAME = (
    r"password|passwd|pwd|token|access_token|refresh_token|id_token|secret|client_secret|api_key|apikey"
    r"|private_key|sig|signature|sas|x-amz-signature|x-amz-credential|x-amz-security-token"
    r"|aws_secret_access_key|aws_access_key_id|aws_session_token"
)
_QUERY_SECRET = re.compile(rf"(?P<head>[?&;](?:{_SECRET_NAME})=)(?P<secret>[^&#\s'\"]+)", re.IGNORECASE)
_SECRET_KEY = re.compile(rf"^(?:{_SECRET_NAME}|.*_(?:password|secret|token|secret_access_key))$", re.IGNORECASE)
# A URL, as far as it runs in text (YAML, an override): what is remembered for ``reveal``.
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"]+")


def shown(text: str) -> str:
    """``text`` as it may be printed or recorded: credentials replaced by ``***`` (nothing remembered)."""
    text = _URL_PASSWORD.sub(lambda m: m["head"] + REDACTED + m["at"], text)
    return _QUERY_SECRET.sub(lambda m: m["head"] + REDACTED, text)


def _secrets(text: str) -> list[str]:
    return [m["secret"] for m in (*_URL_PASSWORD.finditer(text), *_QUERY_SECRET.finditer(text))]


def env_name(redacted: str) -> str:
    """The environment variable that carries the real text of ``redacted`` to child processes."""
    return ENV_PREFIX + hashlib.sha256(redacted.encode()).hexdigest()[:16].upper()


def redact_text(text: str) -> str:
    """``text`` with every URL password and secret query value replaced by ``***``; each URL that
    held a real one is remembered in this process's environment, for ``reveal`` here and in children."""
    for url in _URL.findall(text):
        secrets = _secrets(url)
        if secrets and REDACTED not in secrets:  # an already redacted URL has nothing to remember
            os.environ[env_name(shown(url))] = url
    return shown(text)


def redact_data(data: Any, key: str = "") -> Any:
    """A parsed config (mappings, lists, strings) with every credential replaced by ``***``."""
    if isinstance(data, dict):
        return {k: redact_data(v, str(k)) for k, v in data.items()}
    if isinstance(data, list):
        return [redact_data(v, key) for v in data]
    if isinstance(data, str):
        if key and _SECRET_KEY.match(key) and data:
            return REDACTED
        return redact_text(data)
    return data


def is_redacted(text: str | None) -> bool:
    """Whether ``text`` holds a credential that was replaced by ``***``."""
    return bool(text) and REDACTED in _secrets(text)


def reveal(text: str | None, what: str, env: str | None = None) -> str | None:
    """The real text behind a redacted ``text`` (unchanged when nothing was redacted).

    From this process's memory of it (the config was read here, or by the pipeline that started
    this step), else from ``env`` when that variable is set; else a one-line ``ConfigError``.
    """
    if text is None or not is_redacted(text):
        return text
    remembered = os.environ.get(env_name(text))
    if remembered:
        return remembered
    if env and os.environ.get(env):
        return os.environ[env]
    where = f"set {env} to the full URL (on a cluster, from a Kubernetes Secret)" if env else "pass it by environment"
    raise ConfigError(
        f"{what} {text} had its password taken out of the recorded config (no secret is kept there); {where}"
    )
