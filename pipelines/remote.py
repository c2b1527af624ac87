"""Submit a compiled pipeline to a Kubeflow Pipelines API server, once or on a schedule.

Talks to the KFP v2beta1 REST API with the compiled IR inline (no separate upload step):
``POST /apis/v2beta1/runs`` for one run, ``POST /apis/v2beta1/recurringruns`` with a cron
trigger for a scheduled one. A bearer token, when the cluster needs one, comes from
``KFP_TOKEN``. KFP's cron has six fields (seconds first); a five-field expression gets ``0``
seconds prepended.
"""

import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from frugalrl.errors import ClusterError, ConfigError
from frugalrl.fusion.trainjob import KINDS

TOKEN_ENV = "KFP_TOKEN"


# KFP's six fields (robfig/cron): the allowed values of each, and the names it takes for months and weekdays.
_CRON_FIELDS = (("second", 0, 59), ("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12),
                ("day of week", 0, 6))  # fmt: skip
_MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
_WEEKDAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
_CRON_NAMES = {
    "month": {m: i + 1 for i, m in enumerate(_MONTHS)},
    "day of week": {d: i for i, d in enumerate(_WEEKDAYS)},
}


def _cron_field_ok(text: str, name: str, low: int, high: int) -> bool:
    """One field: ``*`` or ``?``, values and ranges (``a-b``), each with an optional ``/step``, comma-joined."""
    names = _CRON_NAMES.get(name, {})

    def value(token: str) -> int | None:
        token = token.upper()
        number = names.get(token, int(token) if token.isdigit() else None)
        return number if number is not None and low <= number <= high else None

    for part in text.split(","):
        base, _, step = part.partition("/")
        if step and (not step.isdigit() or int(step) < 1):
            return False
        if base in ("*", "?"):
            continue
        ends = base.split("-")
        if len(ends) > 2 or any(value(end) is None for end in ends):
            return False
        if len(ends) == 2 and value(ends[0]) > value(ends[1]):
            return False
    return True


def kfp_cron(expression: str) -> str:
    """A KFP six-field cron expression from a five- or six-field one (checked here, field by field, before
    any server is asked); anything else is a one-line ConfigError naming the field."""
    fields = expression.split()
    if len(fields) == 5:
        fields = ["0", *fields]
    example = "e.g. '0 3 * * *' (daily at 03:00)"
    if len(fields) != 6:
        raise ConfigError(f"--cron {expression!r} is not a cron expression (5 or 6 fields); {example}")
    for text, (name, low, high) in zip(fields, _CRON_FIELDS, strict=True):
        if not _cron_field_ok(text, name, low, high):
            raise ConfigError(f"--cron {expression!r}: {name} {text!r} is not a value in {low}-{high}; {example}")
    return " ".join(fields)


def _spec(package: Path) -> tuple[dict, dict | None]:
    """The pipeline spec (and platform spec) of a compiled IR YAML; anything else is a ConfigError."""
    try:
        docs = list(yaml.safe_load_all(package.read_text()))
    except (UnicodeDecodeError, yaml.YAMLError):
        docs = []
    if not docs or not isinstance(docs[0], dict) or "pipelineInfo" not in docs[0]:
        raise ConfigError(
            f"--package {package} is not a compiled pipeline (Kubeflow IR YAML); "
            "compile one with `frugalrl pipeline compile -o pipeline.yaml`"
        )
    return docs[0], (docs[1] if len(docs) > 1 and isinstance(docs[1], dict) else None)


# The identity steps run as (infra/kfp/rbac.yaml); KFP sets it per run, the IR cannot carry it.
SERVICE_ACCOUNT = "frugalrl-pipeline"


# The IR's parameter types and the values each takes (bool is an int to Python: refused where a number is due).
_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "NUMBER_INTEGER": ((int,), "an integer"), "NUMBER_DOUBLE": ((int, float), "a number"),
    "STRING": ((str,), "a string"), "BOOLEAN": ((bool,), "true or false"),
    "STRUCT": ((dict,), "a mapping, e.g. {key: value}"), "LIST": ((list,), "a list, e.g. [a, b]"),
}  # fmt: skip
# Parameters whose values the pipeline's code knows and the IR cannot say: refused before anything is sent.
CHOICES = {"training_job_kind": KINDS}


def check_parameters(spec: dict[str, Any], parameters: dict[str, Any]) -> None:
    """Each ``--param`` names one of the compiled pipeline's parameters and has its type (and, where the
    pipeline knows them, one of its values); otherwise a one-line ConfigError, as KFP would fail the run later."""
    declared = ((spec.get("root") or {}).get("inputDefinitions") or {}).get("parameters") or {}
    for key, value in parameters.items():
        if key not in declared:
            known = ", ".join(sorted(declared)) or "none"
            raise ConfigError(f"--param {key}: not a parameter of this pipeline; its parameters: {known}")
        kinds, expected = _TYPES.get(declared[key].get("parameterType"), ((object,), "a value"))
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise ConfigError(f"--param {key}={json.dumps(value)}: {expected} expected")
        if key in CHOICES and value not in CHOICES[key]:
            raise ConfigError(f"--param {key}={value}: one of {', '.join(CHOICES[key])}")


def run_body(package: Path, name: str, parameters: dict[str, Any], service_account: str = SERVICE_ACCOUNT) -> dict:
    """The JSON body of a one-off run of ``package`` (compiled IR YAML), its steps running as ``service_account``."""
    spec, platform = _spec(package)
    check_parameters(spec, parameters)
    pipeline_spec = {"pipeline_spec": spec, "platform_spec": platform} if platform else spec
    return {"display_name": name, "pipeline_spec": pipeline_spec, "runtime_config": {"parameters": parameters},
            "service_account": service_account}  # fmt: skip


def recurring_body(
    package: Path, name: str, parameters: dict[str, Any], cron: str, service_account: str = SERVICE_ACCOUNT
) -> dict[str, Any]:
    """The JSON body of a recurring run: the same spec, a cron trigger, one run at a time, no catch-up."""
    return {
        **run_body(package, name, parameters, service_account),
        "trigger": {"cron_schedule": {"cron": kfp_cron(cron)}},
        "max_concurrency": "1",
        "mode": "ENABLE",
        "no_catchup": True,
    }


def post(host: str, path: str, body: dict[str, Any], timeout: float = 30.0) -> dict[str, Any]:
    """POST ``body`` to the KFP API server; a clear ClusterError when it refuses or is unreachable."""
    url = host.rstrip("/") + path
    headers = {"Content-Type": "application/json"}
    if os.environ.get(TOKEN_ENV):
        headers["Authorization"] = f"Bearer {os.environ[TOKEN_ENV]}"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            reply = _json_reply(response.read())
    except urllib.error.HTTPError as exc:
        detail = _describe_reply(exc.read())
        raise ClusterError(f"KFP API {url} answered {exc.code}: {detail}; check --host and {TOKEN_ENV}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise ClusterError(f"KFP API {url} is unreachable ({exc}); check --host, e.g. http://localhost:8080") from None
    if reply is None:  # a web page, a proxy's login form: something answered, not the KFP API
        raise ClusterError(
            f"{url} answered with something other than the KFP API's JSON; point --host at the KFP API "
            "server (e.g. http://localhost:8080 after kubectl port-forward -n kubeflow svc/ml-pipeline-ui 8080:80)"
        )
    return reply


def _json_reply(raw: bytes) -> dict[str, Any] | None:
    """The API's JSON object, or None when the reply is not one (an HTML page, a bare string)."""
    try:
        reply = json.loads(raw or b"{}")
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return reply if isinstance(reply, dict) else None


def _describe_reply(raw: bytes) -> str:
    """An error reply in one short line: the API's own message, or what kind of page answered instead."""
    reply = _json_reply(raw)
    if reply is not None:
        message = reply.get("message") or reply.get("error") or json.dumps(reply)
        return " ".join(str(message).split())[:200]
    text = raw.decode(errors="replace")
    if "<html" in text.lower() or "<!doctype" in text.lower():
        return "an HTML page, not the KFP API"
    return " ".join(text.split())[:200] or "an empty reply"


def _created(reply: dict[str, Any], key: str, url: str) -> dict[str, Any]:
    """``reply`` when it names what KFP created (``run_id``, ``recurring_run_id``); a JSON API that is not KFP
    answers something else, and nothing was started."""
    if not isinstance(reply.get(key), str) or not reply[key]:
        raise ClusterError(
            f"{url} answered JSON without a {key}: not the KFP v2beta1 API, and nothing is known to run; "
            "point --host at the KFP API server (e.g. http://localhost:8080)"
        )
    return reply


def submit(
    host: str, package: Path, name: str, parameters: dict[str, Any], service_account: str = SERVICE_ACCOUNT
) -> dict[str, Any]:
    path = "/apis/v2beta1/runs"
    reply = post(host, path, run_body(package, name, parameters, service_account))
    return _created(reply, "run_id", host.rstrip("/") + path)


def schedule(
    host: str, package: Path, name: str, parameters: dict[str, Any], cron: str, service_account: str = SERVICE_ACCOUNT
) -> dict[str, Any]:
    path = "/apis/v2beta1/recurringruns"
    reply = post(host, path, recurring_body(package, name, parameters, cron, service_account))
    return _created(reply, "recurring_run_id", host.rstrip("/") + path)
