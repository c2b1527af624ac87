"""Bad input on every command: exit code 2, at most 3 lines naming the problem, no traceback, nothing changed.

Table-driven, written from the commands' arguments: each case builds its inputs in a fresh
directory, runs ``frugalrl ...`` in-process, and checks the exit code, the error text, that no
traceback escaped and that no file under the directory (nor the working directory) was created,
changed or removed (checksums before and after).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from frugalrl.cli import main
from frugalrl.runlock import RunLock

from .conftest import REPO, tiny_config

# ------------------------------------------------------------------ the inputs


# Configs that fail validation itself (schema, YAML, values). Every command that reads a config
# refuses each of them.
BAD_CONFIGS: dict[str, str | bytes] = {
    "empty file": "",
    "only whitespace": "   \n\n",
    "a list at the top": "- 1\n- 2\n",
    "a bare string": "hello\n",
    "duplicate key": "algo: ppo\nseed: 1\nseed: 2\n",
    "duplicate nested key": "ppo:\n  learning_rate: 0.1\n  learning_rate: 0.2\n",
    "unclosed bracket": "policy:\n  hidden: [64,\n",
    "tab indentation": "ppo:\n\tlearning_rate: 0.1\n",
    "not UTF-8": b"\xff\xfe\x00a\x00l\x00g\x00o",
    "unknown top key": "nonsense: 1\n",
    "unknown nested key": "ppo:\n  learnig_rate: 0.1\n",
    "bool as epochs": "ppo:\n  update_epochs: true\n",
    "bool as seed": "seed: false\n",
    "infinite eps": "ppo:\n  adam_eps: .inf\n",
    "nan learning rate": "ppo:\n  learning_rate: .nan\n",
    "negative learning rate": "ppo:\n  learning_rate: -1\n",
    "text learning rate": "ppo:\n  learning_rate: 3e-4x\n",
    "negative seed": "seed: -3\n",
    "zero envs": "env:\n  num_envs: 0\n",
    "env module missing": "env:\n  id: frugalrl_no_such_env_module:Reach1D-v0\n",
    "env module raises on import": "env:\n  imports: [tests.env_module_raising]\n  id: Reach1D-v0\n",
    "unknown env": "env:\n  id: NoSuchEnv-v0\n",
    "unknown algo": "algo: a2c\n",
    "unknown device": "device: tpu\n",
    "ignored ppo section": "algo: dqn\nenv:\n  id: CartPole-v1\nppo:\n  learning_rate: 0.1\n",
    "ignored sac section": "sac:\n  batch_size: 7\n",
    "batch over rollout": "ppo:\n  batch_size: 99999\n",
    "atari frames too small": "env:\n  id: ALE/Breakout-v5\n  atari:\n    img_size: 17\n",
    "zero eval episodes": "eval:\n  episodes: 0\n",
    "zero tracking timeout": "tracking:\n  timeout_s: 0\n",
    "unknown selector": "selection:\n  kind: nope\n",
    "unknown replay": "replay:\n  kind: nope\n",
    "zero workers": "distributed:\n  workers: 0\n",
    "cpu budget on two workers": "cpu_budget_s: 60\ndistributed:\n  workers: 2\n",
    "peft rank not a number": (
        "algo: sac\nenv:\n  id: InvertedPendulum-v5\npeft:\n  targets:\n    - {name: t, dynamics: {mass_scale: 2}}\n"
        "  methods:\n    lora: {rank: big}\n"
    ),
    "peft unknown method": (
        "algo: sac\nenv:\n  id: InvertedPendulum-v5\npeft:\n  targets:\n    - {name: t, dynamics: {mass_scale: 2}}\n"
        "  methods:\n    lorra: {}\n"
    ),
    "selection without ppo": "algo: dqn\nenv:\n  id: CartPole-v1\nselection:\n  kind: random\n",
    # issue 34: settings written by hand count even at their defaults; widths and env ids checked before training
    "ppo setting at its default under algo dqn": "algo: dqn\nenv:\n  id: CartPole-v1\nppo:\n  clip_coef: 0.2\n",
    "peft rank wider than the network": (
        "algo: sac\nenv:\n  id: InvertedPendulum-v5\npolicy:\n  hidden: [32, 32]\npeft:\n  targets:\n"
        "    - {name: t, dynamics: {mass_scale: 2}}\n  methods:\n    lora: {rank: 100000}\n"
    ),
    "peft target env unknown": (
        "algo: sac\nenv:\n  id: InvertedPendulum-v5\npeft:\n  targets:\n    - {name: t, env_id: Nope-v0}\n"
    ),
}

# Configs that validate but ask for something the env cannot give: refused by the commands
# that make the env (config validate, train), before anything is written.
BAD_ENV_CONFIGS: dict[str, str] = {
    "sac on discrete actions": "algo: sac\nenv:\n  id: CartPole-v1\n",
    "dqn on continuous actions": "algo: dqn\nenv:\n  id: Pendulum-v1\n",
    "negative episode limit": "env:\n  id: CartPole-v1\n  kwargs:\n    max_episode_steps: -5\n",
    "unknown env kwarg": "env:\n  id: CartPole-v1\n  kwargs:\n    no_such_kwarg: 1\n",
    "latent on classic control": "env:\n  id: CartPole-v1\nrollout:\n  kind: latent\n",
}

BAD_SETS = {
    "no equals sign": "ppo.learning_rate",
    "empty key": "=3",
    "unclosed list": "policy.hidden=[64,",
    "unclosed mapping": "env.kwargs={a: 1",
    "unknown key": "ppo.learnig_rate=0.1",
    "bool as number": "ppo.update_epochs=true",
    "infinite value": "ppo.clip_coef=.inf",
    "section as value": "ppo=3",
    "text as number": "seed=abc",
    "below a scalar": "seed.x=1",
}


# ------------------------------------------------------------------ the cases


@dataclass
class Case:
    name: str
    argv: Callable[[Path], list[str]]  # the command line, given the case's directory
    setup: Callable[[Path], None] = lambda d: None
    says: str = ""  # a fragment the error line must contain


def _write(name: str, content: str | bytes) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        path = d / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())

    return setup


def _good_config(d: Path) -> None:
    (d / "good.yaml").write_text(json.dumps(tiny_config().to_dict()))


def _non_empty_out(d: Path) -> None:
    _good_config(d)
    (d / "out").mkdir()
    (d / "out" / "notes.txt").write_text("the user's own file\n")


def _run_without_checkpoint(d: Path) -> None:
    _good_config(d)
    (d / "run").mkdir()
    (d / "run" / "config.yaml").write_text((d / "good.yaml").read_text())


def _corrupt_checkpoint(d: Path) -> None:
    _run_without_checkpoint(d)
    (d / "run" / "checkpoint.pt").write_bytes(b"not a checkpoint at all")


def _tuning_beside_a_run(d: Path) -> None:
    """A tuning config, and a training run's directory its --out names."""
    _corrupt_checkpoint(d)
    (d / "tune.yaml").write_text((REPO / "configs" / "cartpole-tune.yaml").read_text())


def _garbage_policy(d: Path) -> None:
    (d / "run").mkdir()
    (d / "run" / "policy.pt").write_bytes(b"\x00garbage")


def _resumable_run_with_corrupt_metrics(d: Path) -> None:
    """A run killed after its checkpoint, whose metrics.jsonl then lost its text (a disk error)."""
    from frugalrl.training import train

    train(tiny_config(), d / "run", interactive=False)
    (d / "run" / "summary.json").unlink()
    with (d / "run" / "metrics.jsonl").open("ab") as log:
        log.write(bytes(range(128, 256)) * 8)


def _finished_run(d: Path) -> None:
    """A run that ended normally (summary.json written), and another config beside it."""
    from frugalrl.training import train

    train(tiny_config(), d / "run", interactive=False)
    (d / "other.yaml").write_text(json.dumps(tiny_config(seed=9).to_dict()))


def _interrupted_run(d: Path) -> None:
    """A run stopped after its last checkpoint (no summary.json), and another config beside it."""
    _finished_run(d)
    (d / "run" / "summary.json").unlink()


_HELD: list[RunLock] = []  # run directories a case's set-up holds, as a live training process would


@pytest.fixture(autouse=True)
def _release_held():
    yield
    while _HELD:
        _HELD.pop().release()


def _live_run(d: Path) -> None:
    """An interrupted run whose directory is held (here by this very process, as by a live ``train``)."""
    _interrupted_run(d)
    _HELD.append(RunLock.take(d / "run"))


def _schedule(cron: str) -> Callable[[Path], list[str]]:
    return lambda d: ["pipeline", "schedule", "--host", "http://127.0.0.1:9", "--cron", cron, "--profile", "quick"]


def _profile(text: str) -> Callable[[Path], None]:
    return _write("profile.yaml", text)


CONFIG_COMMANDS: dict[str, Callable[[Path], list[str]]] = {
    "config validate": lambda d: ["config", "validate", str(d / "c.yaml")],
    "config show": lambda d: ["config", "show", str(d / "c.yaml")],
    "train": lambda d: ["train", str(d / "c.yaml"), "--out", str(d / "out")],
    "tune": lambda d: ["tune", "-c", str(d / "c.yaml"), "-o", str(d / "out")],
    "pretrain evaluator": lambda d: ["pretrain", "evaluator", "-c", str(d / "c.yaml"), "-o", str(d / "out")],
    "pretrain encoder": lambda d: ["pretrain", "encoder", "-c", str(d / "c.yaml"), "-o", str(d / "out")],
    "peft compare": lambda d: ["peft", "compare", "-c", str(d / "c.yaml"), "-o", str(d / "out")],
    "pipeline compile": lambda d: ["pipeline", "compile", "-o", str(d / "p.yaml"), "--config", str(d / "c.yaml")],
}

CASES: list[Case] = []
for command, argv in CONFIG_COMMANDS.items():
    for what, content in BAD_CONFIGS.items():
        CASES.append(Case(f"{command}: {what}", argv, _write("c.yaml", content), "c.yaml"))
    CASES.append(Case(f"{command}: config missing", argv, says="not found"))
    CASES.append(Case(f"{command}: config is a directory", argv, lambda d: (d / "c.yaml").mkdir(), "directory"))
for command in ("config validate", "train"):
    for what, content in BAD_ENV_CONFIGS.items():
        CASES.append(Case(f"{command}: {what}", CONFIG_COMMANDS[command], _write("c.yaml", content)))
for what, item in BAD_SETS.items():
    validate = ["config", "validate", "DIR/good.yaml", "--set", item]
    train_it = ["train", "DIR/good.yaml", "--out", "DIR/out", "--set", item]
    for label, template in (("config validate", validate), ("train", train_it)):
        argv = lambda d, t=template: [part.replace("DIR", str(d), 1) for part in t]  # noqa: E731
        CASES.append(Case(f"{label} --set: {what}", argv, _good_config))

CASES += [
    # train: where the run goes
    Case(
        "train: --out empty string (unset variable)",
        lambda d: ["train", str(d / "good.yaml"), "--out", ""],
        _good_config,
        "current directory",
    ),
    Case(
        "train: --out holds other files",
        lambda d: ["train", str(d / "good.yaml"), "--out", str(d / "out")],
        _non_empty_out,
        "not empty",
    ),
    Case(
        "train: --out is a file",
        lambda d: ["train", str(d / "good.yaml"), "--out", str(d / "good.yaml")],
        _good_config,
        "is a file",
    ),
    Case(
        "train: --out holds a killed run",
        lambda d: ["train", str(d / "good.yaml"), "--out", str(d / "run")],
        _run_without_checkpoint,
        "not empty",
    ),
    Case("train: no arguments", lambda d: ["train"], says="CONFIG"),
    Case("train: config but no --out", lambda d: ["train", str(d / "good.yaml")], _good_config, "--out"),
    Case("train: --resume a missing directory", lambda d: ["train", "--resume", str(d / "nope")], says="not found"),
    Case(
        "train: --resume without a checkpoint",
        lambda d: ["train", "--resume", str(d / "run")],
        _run_without_checkpoint,
        "checkpoint",
    ),
    Case(
        "train: --resume a corrupt checkpoint",
        lambda d: ["train", "--resume", str(d / "run")],
        _corrupt_checkpoint,
        "corrupt",
    ),
    Case(
        "train: --resume with --set",
        lambda d: ["train", "--resume", str(d / "run"), "--set", "seed=2"],
        _corrupt_checkpoint,
        "--set",
    ),
    Case(
        "train: --out and --resume differ",
        lambda d: ["train", "--resume", str(d / "run"), "--out", str(d / "o")],
        _corrupt_checkpoint,
        "differ",
    ),
    Case(
        "train: --workers 0",
        lambda d: ["train", str(d / "good.yaml"), "--out", str(d / "o"), "--workers", "0"],
        _good_config,
        "--workers",
    ),
    Case("train: unknown option", lambda d: ["train", "--epochs", "3"], says="--epochs"),
    # tune: where the trials go
    Case(
        "tune: --out holds a training run",
        lambda d: ["tune", "-c", str(d / "tune.yaml"), "-o", str(d / "run")],
        _tuning_beside_a_run,
        "holds a training run",
    ),
    Case(
        "tune: --out holds other files",
        lambda d: ["tune", "-c", str(d / "tune.yaml"), "-o", str(d / "out")],
        lambda d: (_tuning_beside_a_run(d), _non_empty_out(d)),
        "holds other files",
    ),
    # every other command that writes a directory: a new or empty one, never another run's
    Case(
        "pretrain evaluator: --out holds a training run",
        lambda d: ["pretrain", "evaluator", "-c", str(d / "good.yaml"), "-o", str(d / "run")],
        _corrupt_checkpoint,
        "move it away or pick a new --out",
    ),
    Case(
        "pretrain encoder: --out holds other files",
        lambda d: ["pretrain", "encoder", "-c", str(d / "good.yaml"), "-o", str(d / "out")],
        _non_empty_out,
        "not empty",
    ),
    Case(
        "peft apply: --out holds a training run",
        lambda d: ["peft", "apply", str(d / "run"), str(d / "a.pt"), "-o", str(d / "run")],
        lambda d: (_corrupt_checkpoint(d), _write("a.pt", b"x")(d)),
        "move it away or pick a new --out",
    ),
    Case(
        "probe-latent: --out holds other files",
        lambda d: ["probe-latent", "--encoder", str(d), "--game", "breakout", "-o", str(d / "out")],
        _non_empty_out,
        "not empty",
    ),
    Case(
        "audit: --keep holds other files",
        lambda d: ["audit", "0123456789abcdef0123456789abcdef", "--keep", str(d / "out")],
        _non_empty_out,
        "--keep",
    ),
    # evaluate
    Case("evaluate: missing run", lambda d: ["evaluate", str(d / "nope")]),
    Case("evaluate: directory without a policy", lambda d: ["evaluate", str(d)]),
    Case("evaluate: garbage policy.pt", lambda d: ["evaluate", str(d / "run")], _garbage_policy),
    Case("evaluate: unknown model in the registry", lambda d: ["evaluate", "models:/no-such-model@champion"]),
    Case("evaluate: malformed models URI", lambda d: ["evaluate", "models:/"]),
    Case("evaluate: --episodes 0", lambda d: ["evaluate", str(d), "--episodes", "0"], says="--episodes"),
    Case("evaluate: --episodes not a number", lambda d: ["evaluate", str(d), "--episodes", "ten"], says="--episodes"),
    Case("evaluate: --seed negative", lambda d: ["evaluate", str(d), "--seed", "-1"], says="--seed"),
    # audit, sync
    Case("audit: unknown run id", lambda d: ["audit", "0123456789abcdef0123456789abcdef"]),
    Case("audit: not a run id", lambda d: ["audit", "../../etc/passwd"]),
    Case("sync: missing directory", lambda d: ["sync", str(d / "nope")], says="not a run directory"),
    Case("sync: a file", lambda d: ["sync", str(d / "good.yaml")], _good_config, "not a run directory"),
    Case("sync: directory without a run", lambda d: ["sync", str(d)], says="names no MLflow run"),
    # peft apply
    Case("peft apply: missing base", lambda d: ["peft", "apply", str(d / "nope"), str(d / "a.pt"), "-o", str(d / "o")]),
    Case(
        "peft apply: garbage adapter",
        lambda d: ["peft", "apply", str(d / "run"), str(d / "a.pt"), "-o", str(d / "o")],
        lambda d: (_garbage_policy(d), _write("a.pt", b"x")(d)),
    ),
    # latent commands
    Case(
        "probe-latent: unknown game",
        lambda d: ["probe-latent", "--encoder", str(d), "--game", "tetris", "-o", str(d / "o")],
        says="tetris",
    ),  # fmt: skip
    Case(
        "probe-latent: missing encoder",
        lambda d: ["probe-latent", "--encoder", str(d / "nope"), "--game", "breakout", "-o", str(d / "o")],
    ),  # fmt: skip
    Case(
        "probe-latent: --steps too few",
        lambda d: ["probe-latent", "--encoder", str(d), "--game", "breakout", "-o", str(d / "o"), "--steps", "5"],
        says="--steps",
    ),  # fmt: skip
    Case(
        "visualize-latent: classic-control env",
        lambda d: ["visualize-latent", "--encoder", str(d), "--env", "CartPole-v1", "-o", str(d / "x.png")],
        says="ALE/",
    ),
    Case(
        "visualize-latent: missing encoder",
        lambda d: [
            "visualize-latent",
            "--encoder",
            str(d / "nope"),
            "--env",
            "ALE/Breakout-v5",
            "-o",
            str(d / "x.png"),
        ],
    ),  # fmt: skip
    Case(
        "pretrain encoder: classic-control env",
        CONFIG_COMMANDS["pretrain encoder"],
        _write("c.yaml", "seed: 1\n"),
        "Atari",
    ),
    # pytorchjob
    Case("pytorchjob validate: missing file", lambda d: ["pytorchjob", "validate", str(d / "nope.yaml")]),
    Case("pytorchjob validate: a directory", lambda d: ["pytorchjob", "validate", str(d)], says="directory"),
    Case(
        "pytorchjob render: one worker",
        lambda d: ["pytorchjob", "render", "--name", "j", "--workers", "1"],
        says="--workers",
    ),
    Case(
        "pytorchjob render: bad name", lambda d: ["pytorchjob", "render", "--name", "Not_A_Label!", "--workers", "2"]
    ),  # fmt: skip
    Case(
        "pytorchjob render: output folder missing",
        lambda d: ["pytorchjob", "render", "--name", "j", "--workers", "2", "-o", str(d / "no" / "j.yaml")],
        says="does not exist",
    ),
    Case(
        "pytorchjob validate: a TrainJob",
        lambda d: ["pytorchjob", "validate", str(REPO / "infra/training/trainjob.yaml")],
        says="trainjob validate",
    ),
    # trainjob (Kubeflow Trainer v2, the default job kind)
    Case(
        "trainjob render: one worker",
        lambda d: ["trainjob", "render", "--name", "j", "--workers", "1", "--image", f"r/f@sha256:{'a' * 64}"],
        says="--workers",
    ),
    Case(
        "trainjob render: image without digest",
        lambda d: ["trainjob", "render", "--name", "j", "--workers", "2", "--image", "frugalrl:0.1.0-cuda"],
        says="not pinned by digest",
    ),
    Case(
        "trainjob render: no image", lambda d: ["trainjob", "render", "--name", "j", "--workers", "2"], says="--image"
    ),
    Case(
        "trainjob render: bad name",
        lambda d: ["trainjob", "render", "--name", "9lives", "--workers", "2", "--image", f"r/f@sha256:{'a' * 64}"],
        says="metadata/name",
    ),
    Case(
        "trainjob render: output is a folder",
        lambda d: [
            "trainjob",
            "render",
            "--name",
            "j",
            "--workers",
            "2",
            "-o",
            str(d),
            "--image",
            "r/f@sha256:" + "a" * 64,
        ],
        says="is a folder",
    ),
    Case("trainjob validate: missing file", lambda d: ["trainjob", "validate", str(d / "nope.yaml")]),
    Case("trainjob validate: a directory", lambda d: ["trainjob", "validate", str(d)], says="directory"),
    Case(
        "trainjob validate: a PyTorchJob",
        lambda d: ["trainjob", "validate", str(REPO / "infra/training/pytorchjob.yaml")],
        says="pytorchjob validate",
    ),
    Case("trainjob validate: empty file", lambda d: ["trainjob", "validate", str(d / "j.yaml")], _write("j.yaml", "")),
    Case(
        "trainjob validate: one node",
        lambda d: ["trainjob", "validate", str(d / "j.yaml")],
        _write("j.yaml", (REPO / "infra/training/trainjob.yaml").read_text().replace("numNodes: 4", "numNodes: 1")),
        "numNodes: 1",
    ),
    Case(
        "trainjob validate: misspelled field",
        lambda d: ["trainjob", "validate", str(d / "j.yaml")],
        _write("j.yaml", (REPO / "infra/training/trainjob.yaml").read_text().replace("numNodes:", "numNode:")),
        "numNode: unknown field",
    ),
    Case(
        "trainjob validate: image by tag",
        lambda d: ["trainjob", "validate", str(d / "j.yaml")],
        _write("j.yaml", (REPO / "infra/training/trainjob.yaml").read_text().replace("@sha256:", ":cuda-")),
        "not pinned by digest",
    ),
    Case(
        "trainjob validate: no torchrun",
        lambda d: ["trainjob", "validate", str(d / "j.yaml")],
        _write("j.yaml", (REPO / "infra/training/trainjob.yaml").read_text().replace("- torchrun\n", "- python\n")),
        "torchrun entry point",
    ),
    # pipelines and profiles
    Case(
        "pipeline compile: unknown profile",
        lambda d: ["pipeline", "compile", "-o", str(d / "p.yaml"), "--profile", "nope"],
        says="known profiles",
    ),
    Case(
        "pipeline run: unknown profile",
        lambda d: ["pipeline", "run", "--profile", "nope", "--root", str(d / "r")],
        says="known profiles",
    ),
    Case(
        "pipeline run: missing config",
        lambda d: ["pipeline", "run", "--config", str(d / "nope.yaml"), "--root", str(d / "r")],
        says="not found",
    ),  # fmt: skip
    Case("pipeline submit: host not a URL", lambda d: ["pipeline", "submit", "--host", "not-a-url"], says="host"),
    Case("pipeline submit: host unreachable", lambda d: ["pipeline", "submit", "--host", "http://127.0.0.1:9"]),
    Case(
        "pipeline schedule: bad cron",
        lambda d: ["pipeline", "schedule", "--host", "http://127.0.0.1:9", "--cron", "every day"],
    ),  # fmt: skip
    # a cron of the right shape but out of range is checked here, not reported as an unreachable host (issue 34)
    *(
        Case(f"pipeline schedule: cron {what}", _schedule(cron), says=says)
        for what, cron, says in (
            ("minute out of range", "99 * * * *", "minute '99'"),
            ("weekday out of range", "0 3 * * 8", "day of week '8'"),
            ("range backwards", "0 5-1 * * *", "hour '5-1'"),
        )
    ),
    Case("pipeline: unknown subcommand", lambda d: ["pipeline", "launch"], says="launch"),
    Case(
        "pipeline compile: --image not a reference",
        lambda d: ["pipeline", "compile", "-o", str(d / "p.yaml"), "--image", "Not An Image!"],
        says="--image",
    ),
    Case(
        "pipeline run: unknown runner",
        lambda d: [
            "pipeline",
            "run",
            "--config",
            str(REPO / "configs/cartpole-ppo.yaml"),
            "--runner",
            "podman",
            "--root",
            str(d / "r"),
        ],
        says="--runner",
    ),  # fmt: skip
    Case(
        "pipeline run: docker runner and --isolated",
        lambda d: [
            "pipeline",
            "run",
            "--config",
            str(REPO / "configs/cartpole-ppo.yaml"),
            "--runner",
            "docker",
            "--isolated",
            "--root",
            str(d / "r"),
        ],
        says="--isolated",
    ),  # fmt: skip
    Case(
        "pipeline run: --image without the docker runner",
        lambda d: [
            "pipeline",
            "run",
            "--config",
            str(REPO / "configs/cartpole-ppo.yaml"),
            "--image",
            "frugalrl:x",
            "--root",
            str(d / "r"),
        ],
        says="--runner docker",
    ),  # fmt: skip
    # the step image
    Case("image build: unknown flavor", lambda d: ["image", "build", "--flavor", "rocm"], says="--flavor"),
    Case("image build: missing pip cert", lambda d: ["image", "build", "--pip-cert", str(d / "nope.pem")], says="cert"),
    Case("image push: a URL as registry", lambda d: ["image", "push", "--registry", "http://r:5000"], says="HOST:PORT"),
    Case("image push: a path as registry", lambda d: ["image", "push", "--registry", "r:5000/x"], says="HOST:PORT"),
    Case("image: unknown subcommand", lambda d: ["image", "pull"], says="pull"),
    Case("unknown command", lambda d: ["fly"], says="fly"),
    Case(
        "evaluate: a hundred million episodes",
        lambda d: ["evaluate", "runs/x", "--episodes", "100000000"],
        says="--episodes",
    ),  # a typo that would play for days is refused (issue 34); the bound is eval.episodes' bound too
    Case(
        "train: --resume with another run's config",
        lambda d: ["train", str(d / "other.yaml"), "--resume", str(d / "run")],
        _interrupted_run,
        "different config",
    ),  # refused before the run's config.yaml is rewritten
    Case(
        "train: --resume a finished run",
        lambda d: ["train", "--resume", str(d / "run")],
        _finished_run,
        "finished run",
    ),  # refused before its checkpoint is rewritten
    Case(
        "config validate: --set algo=dqn on a PPO config",
        lambda d: ["config", "validate", str(REPO / "configs/cartpole-ppo.yaml"), "--set", "algo=dqn"],
        says="ignored by algo 'dqn'",
    ),  # its ppo values equal PPO's defaults, and still they were written to be used
    Case(
        "pretrain evaluator: a config without a pivot section",
        lambda d: ["pretrain", "evaluator", "-c", str(REPO / "configs/cartpole-ppo.yaml"), "-o", str(d / "out")],
        says="no pivot section",
    ),  # it would register an evaluator of default settings nobody chose, and promote it
    Case(
        "train: --resume a run whose metrics.jsonl is corrupt",
        lambda d: ["train", "--resume", str(d / "run")],
        _resumable_run_with_corrupt_metrics,
        "metrics.jsonl is corrupt",
    ),
    # issue 55: a run directory belongs to one process at a time (frugalrl.runlock)
    Case(
        "train: --resume a run another process trains",
        lambda d: ["train", "--resume", str(d / "run")],
        _live_run,
        "is in use: another process (pid",
    ),
    Case(
        "train: --out a run another process trains",
        lambda d: ["train", str(d / "other.yaml"), "--out", str(d / "run")],
        _live_run,
        "is in use: another process (pid",
    ),
    # pipeline compile/submit/schedule: the file to write, the package to send
    Case(
        "pipeline compile: -o an existing folder",
        lambda d: ["pipeline", "compile", "--config", str(d / "good.yaml"), "-o", str(d)],
        _good_config,
        "is a folder",
    ),
    Case(
        "pipeline compile: -o not a YAML file",
        lambda d: ["pipeline", "compile", "--config", str(d / "good.yaml"), "-o", str(d / "p.json")],
        _good_config,
        ".yaml",
    ),
    Case(
        "pipeline submit: --package of random bytes",
        lambda d: ["pipeline", "submit", "--host", "http://127.0.0.1:9", "--package", str(d / "p.pt")],
        _write("p.pt", bytes(range(256)) * 4),
        "not a compiled pipeline",
    ),
    Case(
        "pipeline submit: --package a YAML that is not a pipeline",
        lambda d: ["pipeline", "submit", "--host", "http://127.0.0.1:9", "--package", str(d / "p.yaml")],
        _write("p.yaml", "a: 1\n"),
        "not a compiled pipeline",
    ),
    Case(
        "pipeline schedule: --package of random bytes",
        lambda d: [
            "pipeline",
            "schedule",
            "--host",
            "http://127.0.0.1:9",
            "--cron",
            "0 3 * * *",
            "--package",
            str(d / "p.pt"),
        ],  # fmt: skip
        _write("p.pt", bytes(range(256)) * 4),
        "not a compiled pipeline",
    ),
]
# pytorchjob validate on files that are not a PyTorchJob manifest: (content, what the line names)
BAD_MANIFESTS: dict[str, tuple[str | bytes, str]] = {
    "binary file": (b"\x89PNG\r\n\x1a\n\x00\x00\xff", "UTF-8"),
    "empty file": ("", "empty"),
    "a list": ("- a\n- b\n", "mapping"),
    "bad YAML": ("kind: [\n", "YAML"),
    "another kind": ("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n", ""),
}
for what, (content, says) in BAD_MANIFESTS.items():
    argv = lambda d: ["pytorchjob", "validate", str(d / "j.yaml")]  # noqa: E731
    CASES.append(Case(f"pytorchjob validate: {what}", argv, _write("j.yaml", content), says))

PROFILES: dict[str, str | bytes] = {
    "empty profile": "",
    "profile duplicate key": "name: a\nname: b\nstages: {}\n",
    "profile bad YAML": "name: [x\n",
    "profile a list": "- a\n",
    "profile misspelled stage": "name: p\nstages:\n  trian: {config: configs/cartpole-ppo.yaml, model_name: m}\n",
    "profile unknown key": "name: p\ncolour: blue\nstages: {}\n",
    "profile stage config missing": "name: p\nstages:\n  train:\n    config: configs/nope.yaml\n    model_name: m\n",
    "profile stage without model name": "name: p\nstages:\n  train:\n    config: configs/cartpole-ppo.yaml\n",
    "profile bad override": (
        "name: p\nstages:\n  train:\n    config: configs/cartpole-ppo.yaml\n    model_name: m\n"
        "    overrides: [ppo.learnig_rate=1]\n"
    ),
    "profile gpu count zero": (
        "name: p\nresources:\n  gpu: {gpu_count: 0, cpu_request: '4', cpu_limit: '8', memory_request: 16G,\n"
        "        memory_limit: 32G, timeout_s: 3600}\nstages: {}\n"
    ),
    "profile old gpu flag": "name: p\ngpu: true\nstages: {}\n",
    "profile binary": b"\xff\xfe\x00n",
}
PROFILE_SAYS = {"profile gpu count zero": "resources.gpu.gpu_count = 0", "profile old gpu flag": "gpu: unknown key"}
for what, text in PROFILES.items():
    argv = lambda d: ["pipeline", "compile", "-o", str(d / "p.yaml"), "--profile", str(d / "profile.yaml")]  # noqa: E731
    CASES.append(Case(f"pipeline compile: {what}", argv, _write("profile.yaml", text), PROFILE_SAYS.get(what, "")))


# A compiled pipeline is for a cluster: what it could not run there is refused in one line, before -o is written.
CLUSTER_CASES = [
    Case(
        "pipeline compile: an image not pinned by registry and digest",
        lambda d: [
            "pipeline",
            "compile",
            "--profile",
            "full",
            "-o",
            str(d / "X.yaml"),
            "--image",
            "frugalrl:0.1.0-cpu",
        ],
        says="not pinned",
    ),
    Case(
        "pipeline compile: a GPU pool for a config on the CPU",
        lambda d: ["pipeline", "compile", "--profile", str(d / "profile.yaml"), "-o", str(d / "X.yaml")],
        _profile(
            "name: p\nstages:\n  train:\n    config: configs/cartpole-ppo.yaml\n    model_name: m\n"
            "    overrides: [tracking.enabled=true]\n    pool: gpu\n"
        ),
        says="asks for a GPU (pool: gpu) but configs/cartpole-ppo.yaml runs on device cpu",
    ),
]
CASES += CLUSTER_CASES


# ------------------------------------------------------------------ the check


def _tree(root: Path) -> dict[str, str]:
    """Path -> checksum (directories too), for every file under ``root``."""
    found = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        found[key] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
    return found


def test_there_are_at_least_150_cases():
    assert len(CASES) >= 150, len(CASES)
    assert len({c.name for c in CASES}) == len(CASES)


def _refused(case: Case, tmp_path: Path, capsys, monkeypatch) -> list[str]:
    """Run ``case``; check it exits 2 with at most 3 lines, no traceback, nothing changed; its error lines."""
    work = tmp_path / "case"
    work.mkdir()
    case.setup(work)
    cwd = tmp_path / "cwd"  # the working directory: an empty --out would write here
    cwd.mkdir()
    (cwd / "config.yaml").write_text("the user's own file\n")
    monkeypatch.chdir(cwd)
    before, before_cwd = _tree(work), _tree(cwd)
    with pytest.raises(SystemExit) as exit_info:
        main(case.argv(work))
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert exit_info.value.code == 2, (exit_info.value.code, captured.err[-2000:], captured.out[-500:])
    assert "Traceback" not in captured.err + captured.out
    assert 1 <= len(lines) <= 3 and lines[0].startswith("error: "), captured.err
    assert case.says in captured.err, captured.err
    assert _tree(work) == before and _tree(cwd) == before_cwd  # nothing created, changed or removed
    assert os.getcwd() == str(cwd)
    return lines


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_one_clear_line_and_changes_nothing(case, tmp_path, capsys, monkeypatch):
    _refused(case, tmp_path, capsys, monkeypatch)


@pytest.mark.parametrize("case", CLUSTER_CASES, ids=[c.name for c in CLUSTER_CASES])
def test_what_a_cluster_could_not_run_is_refused_in_exactly_one_line(case, tmp_path, capsys, monkeypatch):
    assert len(_refused(case, tmp_path, capsys, monkeypatch)) == 1
    assert not (tmp_path / "case" / "X.yaml").exists()  # the -o path: never written
