"""The ``frugalrl`` command: the root group every command hangs from (imported when used), and ``main``.

Every user-fixable problem is a ``FrugalError``: one line on stderr, exit code 2 (``main`` sees to it).
"""

from __future__ import annotations

import errno
import logging
import os
import sys

import typer

from frugalrl.cli.lazy import LazyCommand, LazyGroup
from frugalrl.credentials import shown
from frugalrl.errors import INTERRUPTED, FrugalError
from frugalrl.extras import missing_extra

# Every command, in the order ``frugalrl --help`` lists them, with the help line it shows there: the
# table is all the listing reads, so ``frugalrl --help`` imports no command module (nor torch, pydantic).
# tests/test_cli.py checks each line against its command's own docstring.
COMMANDS = {
    "train": LazyCommand("frugalrl.cli.training:train",
                         "Train a policy; writes OUT/summary.json, a checkpoint and the resolved config."),
    "tune": LazyCommand("frugalrl.cli.training:tune", "Search the config's tuning.space with Optuna; several "
                        "workers may share one study (OPTUNA_STORAGE)."),
    "race": LazyCommand("frugalrl.cli.race:race",
                        "Race techniques at equal CPU on your task over paired seeds; a table and a decision."),
    "audit": LazyCommand("frugalrl.cli.audit:audit", "Re-run a tracked run on its recorded commit and config; "
                         "exit 0 if its metrics reproduce, 1 if not."),
    "probe-latent": LazyCommand("frugalrl.cli.latent:probe_latent_command",
                                "Held-out R^2 of linear and MLP probes from the latent to RAM-annotated positions."),
    "visualize-latent": LazyCommand("frugalrl.cli.latent:visualize_latent_command", "Frames beside their "
                                    "reconstructions (with PSNR) and a 2-D projection of the latents."),
    "evaluate": LazyCommand("frugalrl.cli.training:evaluate",
                            "Evaluate a policy over fixed seeds: mean, std, IQM and a 95% bootstrap CI."),
    "sync": LazyCommand("frugalrl.cli.training:sync",
                        "Send what a run kept while its MLflow store was away; mark a run that was killed KILLED."),
    "check": LazyCommand("frugalrl.cli.check:check",
                         "What works on this machine: torch, ALE, MuJoCo, Box2D, MLflow, kfp."),
    "config": LazyCommand("frugalrl.cli.configs:config_app", "Experiment configs."),
    "pipeline": LazyCommand("frugalrl.cli.pipeline:pipeline_app",
                            "Kubeflow pipelines: compile, check, submit, schedule, run here."),
    "pretrain": LazyCommand("frugalrl.cli.pretrain:pretrain_app",
                            "Pretraining steps: importance evaluator, frame encoder."),
    "peft": LazyCommand("frugalrl.cli.peft:peft_app",
                        "Parameter-efficient fine-tuning: compare methods, apply adapters."),
    "trainjob": LazyCommand("frugalrl.cli.jobs:trainjob_app",
                            "Kubeflow Trainer v2 TrainJob manifests for multi-worker training (the default)."),
    "pytorchjob": LazyCommand("frugalrl.cli.jobs:pytorchjob_app",
                              "Kubeflow Training Operator PyTorchJob manifests (legacy; TrainJob is the default)."),
    "image": LazyCommand("frugalrl.cli.image:image_app", "The step image: build it from this checkout, push it."),
}  # fmt: skip

app = LazyGroup(lazy=COMMANDS, name="frugalrl", no_args_is_help=True,
                help="frugalrl: cheaper RL training, every run auditable.")  # fmt: skip


LIST_OPTIONS = ("--games", "--contenders")  # options that take several values after one flag, as users type lists


def spread_list_options(argv: list[str]) -> list[str]:
    """``--games A B`` -> ``--games A --games B`` (Click options take one value per flag)."""
    out: list[str] = []
    flag, taken = None, 0
    for arg in [*argv, None]:
        if flag and arg is not None and not arg.startswith("-"):
            out += [flag, arg]
            taken += 1
            continue
        if flag and not taken:
            out.append(flag)  # no value: Click says the option needs one
        flag, taken = (arg, 0) if arg in LIST_OPTIONS else (None, 0)
        if arg is not None and flag is None:
            out.append(arg)
    return out


def main(argv: list[str] | None = None) -> None:
    """Run the command; returns on success, exits non-zero otherwise (2 for bad input, 130 for Ctrl-C).

    Click runs outside its standalone mode so that every way out passes here: a usage error is
    one line (not a usage box), Ctrl-C is a message and 130 (Click would print "Aborted!", exit 1).
    """
    # MLflow's INFO lines ("Creating initial MLflow database tables...") are not the user's business:
    # the variable covers an import still to come, the level one that already happened
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    logging.getLogger("mlflow").setLevel(os.environ["MLFLOW_LOGGING_LEVEL"])
    try:
        code = app(args=spread_list_options(sys.argv[1:] if argv is None else argv), prog_name="frugalrl",
                   standalone_mode=False)  # fmt: skip
    except typer.TyperException as exc:  # bad arguments or options (typer's public base of its usage errors)
        command = " ".join(exc.ctx.command_path.split()[1:]) if getattr(exc, "ctx", None) else ""
        line = f"error: {exc.format_message()} (see: frugalrl {command} --help)".replace("  ", " ")
        print(shown(line), file=sys.stderr)  # an option's value may be a URL with its password
        sys.exit(exc.exit_code)
    except FrugalError as exc:
        print(f"error: {shown(str(exc))}", file=sys.stderr)  # messages hide credentials; this is the last guard
        sys.exit(exc.exit_code)
    except ModuleNotFoundError as exc:  # a command of an optional extra (pyproject.toml) on a core install
        line = missing_extra(exc)
        if line is None:
            raise
        print(f"error: {line}", file=sys.stderr)
        sys.exit(2)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM):
            raise
        where = f" writing {exc.filename}" if exc.filename else ""
        fix = "free space or fix the permissions, then run again (finished files are kept; a run goes on with --resume)"
        print(f"error: {exc.strerror}{where}; {fix}", file=sys.stderr)
        sys.exit(2)
    except (KeyboardInterrupt, typer.Abort):
        code = 130
    if code == 130:  # typer (0.16 and later) turns Ctrl-C into this return code, silently
        print(INTERRUPTED, file=sys.stderr)
    if isinstance(code, int) and code != 0:
        sys.exit(code)
