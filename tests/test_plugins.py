"""The seam registries (rollout sources, selectors, replay stores, hyper controllers, PPO step kinds, gradient
reducers): a new kind is one module dropped into its package; a PEFT method is one registration.

The modules are the examples of docs/architecture.md, taken from the page as they stand, so
the page cannot drift from what works.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
from pathlib import Path

import gymnasium as gym
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import frugalrl.algos.step_kinds
import frugalrl.fusion.reducers
import frugalrl.meta
import frugalrl.replay
import frugalrl.rollouts
import frugalrl.selectors
from frugalrl.algos.sac import SquashedGaussianActor
from frugalrl.algos.step_kinds import STEP_KINDS
from frugalrl.config import ConfigError, validate_config
from frugalrl.fusion import make_reducer
from frugalrl.fusion.reducers import REDUCERS
from frugalrl.meta import HYPER_CONTROLLERS
from frugalrl.peft import methods as peft_methods
from frugalrl.replay.registry import REPLAY_STORES
from frugalrl.rollouts import ROLLOUT_SOURCES
from frugalrl.selectors import SELECTORS

from .conftest import REPO, tiny_config
from .test_dqn import dqn_config

ARCHITECTURE = REPO / "docs" / "architecture.md"


def _example(first_line: str) -> str:
    """The python block of docs/architecture.md whose first line is ``first_line``."""
    for block in re.findall(r"```python\n(.*?)```", ARCHITECTURE.read_text(), flags=re.S):
        if block.startswith(first_line + "\n"):
            return block
    raise AssertionError(f"docs/architecture.md has no example starting {first_line!r}")


def _drop_module(monkeypatch, tmp_path: Path, package, first_line: str) -> str:
    """Put the docs' module into ``package`` (through an extra path entry) for this test; its name."""
    name = Path(first_line.removeprefix("# ")).name
    tmp_path.mkdir()
    (tmp_path / name).write_text(_example(first_line))
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path)])
    return f"{package.__name__}.{name.removesuffix('.py')}"


def _example_kind(monkeypatch, tmp_path, package, first_line: str, registry, kind: str):
    """Drop a docs example into ``package`` for one test, then forget its kind and its module."""
    module = _drop_module(monkeypatch, tmp_path / "module", package, first_line)
    yield tmp_path / "module"
    registry.unregister(kind)
    sys.modules.pop(module, None)


@pytest.fixture
def top_advantage(monkeypatch, tmp_path):
    yield from _example_kind(monkeypatch, tmp_path, frugalrl.selectors, "# src/frugalrl/selectors/top_advantage.py",
                             SELECTORS, "top_advantage")  # fmt: skip


@pytest.fixture
def recent_replay(monkeypatch, tmp_path):
    yield from _example_kind(monkeypatch, tmp_path, frugalrl.replay, "# src/frugalrl/replay/recent.py",
                             REPLAY_STORES, "recent")  # fmt: skip


@pytest.fixture
def lr_decay(monkeypatch, tmp_path):
    yield from _example_kind(monkeypatch, tmp_path, frugalrl.meta, "# src/frugalrl/meta/lr_decay.py",
                             HYPER_CONTROLLERS, "lr_decay")  # fmt: skip


@pytest.fixture
def checked_step(monkeypatch, tmp_path):
    yield from _example_kind(monkeypatch, tmp_path, frugalrl.algos.step_kinds,
                             "# src/frugalrl/algos/step_kinds/checked.py", STEP_KINDS, "checked")  # fmt: skip


@pytest.fixture
def half_reducer(monkeypatch, tmp_path):
    yield from _example_kind(monkeypatch, tmp_path, frugalrl.fusion.reducers,
                             "# src/frugalrl/fusion/reducers/half.py", REDUCERS, "half")  # fmt: skip


@pytest.fixture
def noisy_source(monkeypatch, tmp_path):
    yield from _example_kind(monkeypatch, tmp_path, frugalrl.rollouts, "# src/frugalrl/rollouts/noisy.py",
                             ROLLOUT_SOURCES, "noisy")  # fmt: skip


def test_the_built_in_kinds_are_registered_by_their_modules():
    assert SELECTORS.kinds() == [
        "advantage_proportional", "advantage_top", "all", "clipped_ratio", "epochs", "pivot", "random", "value_error"
    ]  # fmt: skip
    assert REPLAY_STORES.kinds() == ["prioritized", "tiered", "uniform"]
    assert HYPER_CONTROLLERS.kinds() == ["fixed", "rmt"]
    assert STEP_KINDS.kinds() == ["auto", "fused", "inductor", "off"]
    assert REDUCERS.kinds() == ["dense", "topk"]
    assert ROLLOUT_SOURCES.kinds() == ["latent", "real"]


@pytest.mark.parametrize(
    ("section", "fragment"),
    [
        (
            {"selection": {"kind": "magic"}},
            "selection.kind = 'magic': not a registered sample selector; known: advantage_proportional,",
        ),
        ({"replay": {"kind": "lifo"}}, "replay.kind = 'lifo': not a registered replay store; known: prioritized,"),
        ({"ppo": {"compile": "jit"}}, "ppo.compile = 'jit': not a registered PPO step kind; known: auto, fused,"),
        (
            {"distributed": {"kind": "ring"}},
            "distributed.kind = 'ring': not a registered gradient reducer; known: dense, topk",
        ),
        ({"distributed": {"kind": "dense", "settings": {"share": 1.0}}}, "remove distributed.settings"),
        ({"distributed": {"settings": {"share": 0}}}, "share: Input should be greater than 0"),
        (
            {"rollout": {"kind": "dream"}},
            "rollout.kind = 'dream': not a registered rollout source; known: latent, real",
        ),
        ({"rollout": {"kind": "real", "settings": {"std": 1}}}, "takes no settings; remove rollout.settings"),
        ({"selection": {"kind": "all", "settings": {"keep": 0.5}}}, "takes no settings; remove selection.settings"),
        (
            {"selection": {"kind": "random", "settings": {"keep": 0.5}}},
            "keep: unknown key for 'random'; allowed: keep_fraction",
        ),
    ],
)
def test_an_unknown_kind_or_stray_settings_are_one_line_errors(section, fragment):
    with pytest.raises(ConfigError) as error:
        validate_config({**section, "env": {"id": "CartPole-v1"}}, "bad.yaml")
    assert fragment in str(error.value) and "\n" not in str(error.value), str(error.value)


def test_a_selector_module_dropped_into_the_package_trains_without_other_changes(top_advantage, tmp_path):
    from frugalrl.training import train

    with pytest.raises(ConfigError, match=r"selection.settings = \{'keep': 2.0\}: keep: Input should be less"):
        validate_config({"selection": {"kind": "top_advantage", "settings": {"keep": 2.0}}}, "bad.yaml")
    with pytest.raises(ConfigError, match="keeep: unknown key for 'top_advantage'; allowed: keep"):
        validate_config({"selection": {"kind": "top_advantage", "settings": {"keeep": 0.5}}}, "bad.yaml")

    plain = train(tiny_config(), tmp_path / "plain")
    config = tiny_config(selection={"kind": "top_advantage", "settings": {"keep": 0.25}})
    summary = train(config, tmp_path / "top")
    assert "top_advantage" in summary["techniques"]
    assert summary["real_env_steps"] == plain["real_env_steps"]
    # a quarter of the samples, packed: a quarter of the backward passes and fewer optimizer steps
    assert summary["backward_samples"] == pytest.approx(0.25 * plain["backward_samples"], rel=0.05)
    assert summary["optimizer_steps"] < plain["optimizer_steps"]


def test_a_replay_module_dropped_into_the_package_serves_dqn(recent_replay, tmp_path):
    from frugalrl.training import train

    with pytest.raises(ConfigError, match="window: Input should be greater than or equal to 1"):
        validate_config({"replay": {"kind": "recent", "settings": {"window": 0}}}, "bad.yaml")
    config = dqn_config(replay={"kind": "recent", "settings": {"window": 20}})
    summary = train(config, tmp_path / "recent")
    assert "replay_recent" in summary["techniques"]
    store = frugalrl.replay.build_replay(config.replay, *_spaces(config), num_envs=1)
    assert type(store).__name__ == "RecentReplay" and store.window == 20


def test_a_hyper_controller_module_dropped_into_the_package_steers_dqn(lr_decay, tmp_path):
    from frugalrl.training import train

    with pytest.raises(ConfigError, match="factor: Input should be less than 1"):
        validate_config({"algo": "dqn", "meta": {"kind": "lr_decay", "settings": {"factor": 1.5}}}, "bad.yaml")
    config = dqn_config(meta={"kind": "lr_decay", "settings": {"factor": 0.5}})
    summary = train(config, tmp_path / "decay")
    assert "lr_decay" in summary["techniques"]
    rows = [json.loads(line) for line in (tmp_path / "decay" / "metrics.jsonl").read_text().splitlines()]
    decays = rows[-1]["lr_decays"]
    assert decays > 0 and rows[-1]["learning_rate"] == pytest.approx(config.dqn.learning_rate * 0.5**decays)


def test_a_step_kind_module_dropped_into_the_package_runs_ppo(checked_step, tmp_path):
    from frugalrl.training import train

    assert validate_config({"env": {"id": "CartPole-v1"}, "ppo": {"compile": "checked"}}, "ok.yaml")
    plain = train(tiny_config(ppo={"compile": "off"}), tmp_path / "plain")
    summary = train(tiny_config(ppo={"compile": "checked"}), tmp_path / "checked")
    assert summary["compile"] == "checked"
    # the eager step with a check that never fires on a healthy run: the same training, step for step
    assert summary["optimizer_steps"] == plain["optimizer_steps"]
    assert summary["backward_samples"] == plain["backward_samples"]


def test_a_rollout_source_module_dropped_into_the_package_feeds_the_learner(noisy_source, tmp_path):
    from frugalrl.training import train

    with pytest.raises(ConfigError, match="std: Input should be greater than or equal to 0"):
        validate_config({"rollout": {"kind": "noisy", "settings": {"std": -1.0}}}, "bad.yaml")
    plain = train(tiny_config(), tmp_path / "plain")
    summary = train(tiny_config(rollout={"kind": "noisy", "settings": {"std": 0.5}}), tmp_path / "noisy")
    assert summary["real_env_steps"] == plain["real_env_steps"]
    assert summary["optimizer_steps"] == plain["optimizer_steps"]  # the same run shape, on other observations
    rows = [(tmp_path / run / "metrics.jsonl").read_text() for run in ("plain", "noisy")]
    assert rows[0] != rows[1]  # the noise reached the learner (same seed, other losses)


def _reducer_worker(rank: int, world: int, port: int, module_dir: str, results: dict) -> None:
    """One of two gloo workers: the docs' reducer (found in ``module_dir``, as in the test's process) built
    from a validated config, one synchronisation; what it left in ``.grad`` and what it sent."""
    frugalrl.fusion.reducers.__path__.append(module_dir)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        config = validate_config({"distributed": {"workers": world, "kind": "half"}}, "ok.yaml")
        torch.manual_seed(rank)
        params = [torch.nn.Parameter(torch.zeros(s)) for s in [(8, 5), (5,), (300,)]]
        grads = [torch.randn(p.shape) for p in params]
        for p, g in zip(params, grads, strict=True):
            p.grad = g.clone()
        fusion = make_reducer(config.distributed, world)
        fusion.synchronize(params)
        results[rank] = {"own": grads, "fused": [p.grad.clone() for p in params], "sent": fusion.bytes_sent,
                         "summary": fusion.summary()}  # fmt: skip
    finally:
        dist.destroy_process_group()


def test_a_reducer_module_dropped_into_the_package_combines_two_workers_gradients(half_reducer):
    with pytest.raises(ConfigError, match="distributed.settings = .*dtype: Input should be 'float16' or 'bfloat16'"):
        validate_config({"distributed": {"kind": "half", "settings": {"dtype": "int8"}}}, "bad.yaml")
    config = validate_config({"distributed": {"workers": 2, "kind": "half", "settings": {"dtype": "bfloat16"}}})
    assert config.distributed.settings == {"dtype": "bfloat16"}
    assert type(make_reducer(config.distributed, 2)).__name__ == "HalfAllReduce"

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    results = mp.Manager().dict()
    mp.spawn(_reducer_worker, args=(2, port, str(half_reducer), results), nprocs=2, join=True)
    mean = [(a + b) / 2 for a, b in zip(results[0]["own"], results[1]["own"], strict=True)]
    for rank in (0, 1):  # the mean on both workers, to float16's rounding, and the same bits on each
        for fused, expected, other in zip(results[rank]["fused"], mean, results[1 - rank]["fused"], strict=True):
            torch.testing.assert_close(fused, expected, rtol=2e-3, atol=2e-3)
            assert torch.equal(fused, other)
    assert results[0]["sent"] == 345 * 2  # 16 bits a value: half the float32 all-reduce's
    assert results[0]["summary"]["compression_ratio"] == 2.0


def test_a_registered_peft_method_is_accepted_and_adapts_the_network():
    exec(compile(_example("# a PEFT method: one registration (the built-ins' are in src/frugalrl/peft/methods.py)"),
                 "architecture.md", "exec"), {})  # fmt: skip
    try:
        config = {"algo": "sac", "env": {"id": "HalfCheetah-v5"}, "peft": {"methods": {"last_layers": {"count": 2}}}}
        assert validate_config(config, "ok.yaml").peft.methods == {"last_layers": {"count": 2}}
        with pytest.raises(ConfigError, match=r"last_layers: unknown option\(s\) \['rank'\]; allowed: \['count'\]"):
            validate_config({**config, "peft": {"methods": {"last_layers": {"rank": 4}}}}, "bad.yaml")
        with pytest.raises(ConfigError, match="last_layers: count: Input should be greater than or equal to 1"):
            validate_config({**config, "peft": {"methods": {"last_layers": {"count": 0}}}}, "bad.yaml")
        network = SquashedGaussianActor(17, gym.spaces.Box(-1.0, 1.0, (2,)), [64, 64], (-20.0, 2.0))
        adaptation = peft_methods.adapt(network, "last_layers", None, ["mean", "log_std"])  # count 1, the default
        trainable = {name for name, p in network.named_parameters() if p.requires_grad}
        last = peft_methods.torso_linears(network, ["mean", "log_std"])[-1]
        assert trainable == {f"{layer}.{part}" for layer in (last, "mean", "log_std") for part in ("weight", "bias")}
        assert adaptation.trainable == (64 * 64 + 64) + 2 * (64 * 2 + 2)
        assert adaptation.options == {"count": 1}
        two = SquashedGaussianActor(17, gym.spaces.Box(-1.0, 1.0, (2,)), [64, 64], (-20.0, 2.0))
        assert peft_methods.adapt(two, "last_layers", {"count": 2}, ["mean", "log_std"]).trainable == (
            (17 * 64 + 64) + (64 * 64 + 64) + 2 * (64 * 2 + 2)
        )
    finally:
        peft_methods.unregister("last_layers")
    assert "last_layers" not in peft_methods.method_names()


def _spaces(config):
    env = gym.make(config.env.id)
    try:
        return env.observation_space, env.action_space
    finally:
        env.close()
