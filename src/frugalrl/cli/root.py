"""The ``frugalrl`` command: the root typer app every command group hangs from, and ``main``.

Every user-fixable problem is a ``FrugalError``: one line on stderr, exit code 2 (``main`` sees to it).
"""

from __future__ import annotations

import errno
import os
import sys

import typer

from frugalrl.cli.configs import config_app
from frugalrl.cli.image import image_app
from frugalrl.cli.jobs import pytorchjob_app, trainjob_app
from frugalrl.cli.latent import probe_latent_command, visualize_latent_command
from frugalrl.cli.ops import audit, check
from frugalrl.cli.peft import peft_app
from frugalrl.cli.pipeline import pipeline_app
from frugalrl.cli.pretrain import pretrain_app
from frugalrl.cli.training import evaluate, sync, train, tune
from frugalrl.errors import INTERRUPTED, FrugalError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="frugalrl: cheaper RL training, every run auditable.",
)

# Typer lists commands in the order they are registered, top-level commands before groups:
# the order here is the order of ``frugalrl --help``.
app.command()(train)
app.command()(tune)
app.command()(audit)
app.command("probe-latent")(probe_latent_command)
app.command("visualize-latent")(visualize_latent_command)
app.command()(evaluate)
app.command()(sync)
app.command()(check)
app.add_typer(config_app, name="config")
app.add_typer(pipeline_app, name="pipeline")
app.add_typer(pretrain_app, name="pretrain")
app.add_typer(peft_app, name="peft")
app.add_typer(trainjob_app, name="trainjob")
app.add_typer(pytorchjob_app, name="pytorchjob")
app.add_typer(image_app, name="image")


LIST_OPTIONS = ("--games",)  # options that take several values after one flag, as users type lists


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
    import logging

    # MLflow's INFO lines ("Creating initial MLflow database tables...") are not the user's business:
    # the variable covers an import still to come, the level one that already happened
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    logging.getLogger("mlflow").setLevel(os.environ["MLFLOW_LOGGING_LEVEL"])
    try:
        code = app(args=spread_list_options(sys.argv[1:] if argv is None else argv), prog_name="frugalrl",
                   standalone_mode=False)  # fmt: skip
    except typer.TyperException as exc:  # bad arguments or options (typer's public base of its usage errors)
        command = " ".join(exc.ctx.command_path.split()[1:]) if getattr(exc, "ctx", None) else ""
        print(f"error: {exc.format_message()} (see: frugalrl {command} --help)".replace("  ", " "), file=sys.stderr)
        sys.exit(exc.exit_code)
    except FrugalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
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
