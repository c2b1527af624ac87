"""The frugalrl command: check, evaluate, train output."""

from __future__ import annotations

import contextlib
import errno
import json
import re
import subprocess
import sys

import pytest
import typer

from frugalrl.cli import COMMANDS, main
from frugalrl.cli.lazy import load_command
from frugalrl.errors import FrugalError
from frugalrl.training import train

from .conftest import REPO, tiny_config


def test_check_reports_every_component(capsys):
    main(["check"])  # returns normally only when every check passes
    out = capsys.readouterr().out
    for name in ("torch", "ALE", "MuJoCo", "Box2D", "MLflow", "kfp"):
        assert name in out
    assert "FAIL" not in out


def test_evaluate_a_run_directory_over_fixed_seeds(tmp_path, capsys):
    train(tiny_config(), tmp_path / "run", interactive=False)
    capsys.readouterr()
    main(["evaluate", str(tmp_path / "run"), "--episodes", "4", "--json"])
    first = json.loads(capsys.readouterr().out)
    main(["evaluate", str(tmp_path / "run" / "policy.pt"), "--episodes", "4", "--json"])
    second = json.loads(capsys.readouterr().out)
    assert first["env_id"] == "CartPole-v1"
    assert first["eval_episodes"] == 4
    assert first["returns"] == second["returns"]


def test_evaluate_missing_model_is_a_clear_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["evaluate", str(tmp_path / "nowhere")])
    assert exit_info.value.code == 2
    assert "not found" in capsys.readouterr().err


# ------------------------------------------------------------------ every way out of cli.main


def _raising(exc: BaseException):
    def app(*args, **kwargs):
        raise exc

    return app


@pytest.mark.parametrize(
    ("exc", "code", "says"),
    [
        (FrugalError("the config is wrong; fix it"), 2, "error: the config is wrong; fix it"),
        (OSError(errno.ENOSPC, "No space left on device", "run/checkpoint.pt"), 2, "writing run/checkpoint.pt"),
        (PermissionError(errno.EACCES, "Permission denied", "run"), 2, "fix the permissions"),
        (KeyboardInterrupt(), 130, "interrupted"),
        (typer.Abort(), 130, "interrupted"),
        (typer.Exit(3), 3, ""),
    ],
    ids=["frugal-error", "disk-full", "permission", "ctrl-c", "abort", "exit-code"],
)
def test_every_way_out_of_main_is_its_exit_code_and_at_most_one_line(exc, code, says, monkeypatch, capsys):
    import frugalrl.cli.root as root  # where main looks the app up

    if isinstance(exc, typer.Exit):  # outside standalone mode Click returns the code
        monkeypatch.setattr(root, "app", lambda *args, **kwargs: exc.exit_code)
    else:
        monkeypatch.setattr(root, "app", _raising(exc))
    with pytest.raises(SystemExit) as exit_info:
        main(["anything"])
    err = capsys.readouterr().err
    assert exit_info.value.code == code
    assert len(err.splitlines()) <= 1 and says in err and "Traceback" not in err


def test_ctrl_c_inside_a_command_is_the_message_and_130(monkeypatch, capsys):
    """Through the real typer, which (0.16 and later) turns Ctrl-C into a silent return code of 130."""
    import frugalrl.cli.configs as configs  # the command module binds load_config when it loads

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(configs, "load_config", interrupted)
    with pytest.raises(SystemExit) as exit_info:
        main(["config", "validate", "configs/cartpole-ppo.yaml"])
    assert exit_info.value.code == 130
    assert capsys.readouterr().err.splitlines() == ["interrupted; files this command finished writing are kept"]


def test_ctrl_c_while_the_command_loads_is_the_same_line(monkeypatch, capsys):
    """The console script (``frugalrl.__main__.run``) guards the import of the command too."""
    import builtins

    import frugalrl.__main__ as entry

    real_import = builtins.__import__

    def interrupted(name, *args, **kwargs):
        if name == "frugalrl.cli":
            raise KeyboardInterrupt
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", interrupted)
    with pytest.raises(SystemExit) as exit_info:
        entry.run()
    assert exit_info.value.code == 130
    assert capsys.readouterr().err.splitlines() == ["interrupted; files this command finished writing are kept"]


def test_a_usage_error_is_one_line_naming_the_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--no-such-option"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert err.splitlines() == [err.strip()] and "--no-such-option" in err and "frugalrl train --help" in err


def test_a_bug_keeps_its_traceback(monkeypatch):
    """An error no user can fix is not dressed up as one: it propagates (with its traceback)."""
    import frugalrl.cli.root as root  # where main looks the app up

    monkeypatch.setattr(root, "app", _raising(ZeroDivisionError("a bug")))
    with pytest.raises(ZeroDivisionError):
        main(["anything"])
    monkeypatch.setattr(root, "app", _raising(OSError(errno.EIO, "Input/output error")))
    with pytest.raises(OSError):
        main(["anything"])


def test_success_returns():
    assert main(["config", "validate", str(REPO / "configs" / "cartpole-ppo.yaml")]) is None


def test_the_cli_names_no_private_module_of_a_dependency():
    """Private modules (``typer._click`` lost ``Abort`` in typer 0.29) change without notice between
    releases: no import of one, and no attribute path into one, in the library, pipelines or components."""
    import importlib.util

    imported = re.compile(r"^\s*(?:from|import)\s+((?!frugalrl\b)\w+(?:\.\w+)*\._\w+)", re.MULTILINE)
    dotted = re.compile(r"\b((?:typer|click|mlflow|kfp|optuna|torch|docker|pydantic|gymnasium)(?:\.\w+)*\._[a-z]\w*)")
    for path in [*(REPO / "src" / "frugalrl").rglob("*.py"), *(REPO / "pipelines").rglob("*.py"),
                 *(REPO / "components").rglob("*.py")]:  # fmt: skip
        text = path.read_text()
        assert not imported.search(text), (path, imported.search(text).group(1))
        for name in dotted.findall(text):  # torch._foreach_norm is a private function, not a module
            with contextlib.suppress(ModuleNotFoundError, ValueError):
                assert importlib.util.find_spec(name) is None, (path, name)


# ------------------------------------------------------------------ the lazy command table


def test_help_lists_every_command_without_importing_one():
    """``frugalrl --help`` reads the table alone: no command module, no torch, no pydantic."""
    shown = "m in ('torch', 'pydantic') or m.startswith('frugalrl.cli.')"
    code = ("import sys\nfrom frugalrl.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            f"print(sorted(m for m in sys.modules if {shown}))")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip().splitlines()[-1] == "['frugalrl.cli.lazy', 'frugalrl.cli.root']"
    listed = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("│ ") and line[2] != " "]
    assert [name for name in listed if name in COMMANDS] == list(COMMANDS)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_command_says_the_help_line_the_table_lists(name):
    """The table's line is the command's own: the docstring's first paragraph, or the group's help."""
    command = load_command(name, COMMANDS[name])
    assert command.name == name
    own = " ".join((command.help or "").split("\n\n")[0].split())
    assert COMMANDS[name].short_help == own


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_command_shows_its_help(name, capsys):
    assert main([name, "--help"]) is None
    out = capsys.readouterr().out
    assert f"frugalrl {name}" in out and "--help" in out
