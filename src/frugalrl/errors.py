"""User-facing errors.

Every error a user can fix (a bad config, a missing file, an unreachable server) is a
``FrugalError``: the CLI prints its one-line message and exits with code 2. Anything else
is a bug and keeps its traceback.
"""

from __future__ import annotations

# What Ctrl-C before training prints (frugalrl.cli.main, and frugalrl.__main__ while the command loads)
INTERRUPTED = "interrupted; files this command finished writing are kept"


class FrugalError(Exception):
    """An error the user can fix; the message names the problem and the fix."""

    exit_code = 2


class ConfigError(FrugalError):
    """A config file or override that does not validate."""


class CheckpointError(FrugalError):
    """A checkpoint that is missing, corrupt or does not match the config."""


class TrackingError(FrugalError):
    """An MLflow tracking store or registry that cannot be used."""


class EnvError(FrugalError):
    """An environment that cannot be built (unknown id, missing ROM, missing extra)."""


class TrainingDiverged(FrugalError):
    """A loss became NaN or inf; the last good checkpoint is kept."""


class PipelineFailed(FrugalError):
    """A pipeline step failed; its own log (printed above) says why."""

    exit_code = 1


class ClusterError(FrugalError):
    """The Kubeflow Pipelines API server is unreachable or refused a request (check --host, KFP_TOKEN)."""


class Interrupted(FrugalError):
    """Ctrl-C during a run: the message names what is kept and how to continue."""

    exit_code = 130
