"""Techniques are objects handed to the learners: the defaults are the plain path, custom ones plug in.

DQN, SAC and PPO take a ``GradientSync`` (after every backward), DQN and SAC a ``HyperController``
(after every update) and DQN an action rule; PPO books its env steps through a ``StepCounter``.
None of them needs a change in the learner to be swapped.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from frugalrl.algos.dqn import DQN
from frugalrl.algos.exploration import BoltzmannActions, GreedyActions
from frugalrl.algos.gradient_sync import LocalSync
from frugalrl.algos.ppo import PPO
from frugalrl.algos.sac import SAC
from frugalrl.cost import CostMeter, count_real_steps, count_virtual_steps
from frugalrl.envs.factory import make_vec_env
from frugalrl.learners import build_learner
from frugalrl.meta import Adjustment, FixedHyperparameters, MetaController

from .conftest import tiny_config
from .test_dqn import dqn_config
from .test_sac import sac_config

LEARNERS = {"dqn": DQN, "sac": SAC, "ppo": PPO}
DQN_UPDATES = 16  # dqn_config learns from update 13 on (200 steps at 16 per update)


def _sac_config(**sections):
    return sac_config(**{**sections, "sac": {"learning_starts": 10, **sections.get("sac", {})}})


def _trained(config, updates: int, **strategies) -> tuple[Any, list[dict[str, float]]]:
    """A learner built from ``config`` (and ``strategies``), after ``updates`` updates; its metrics."""
    torch.manual_seed(config.seed)
    env = make_vec_env(config.env, gamma=config.algo_config.gamma)
    agent = LEARNERS[config.algo](config, env, CostMeter(), torch.device("cpu"), **strategies)
    agent.start(config.seed)
    return agent, [agent.run_update() for _ in range(updates)]


def _assert_same_run(a: tuple[Any, list], b: tuple[Any, list]) -> None:
    (agent_a, rows_a), (agent_b, rows_b) = a, b
    assert rows_a == rows_b  # every figure of every update, bit for bit
    for (name, x), (_, y) in zip(agent_a.policy.state_dict().items(), agent_b.policy.state_dict().items(), strict=True):
        assert torch.equal(x, y), name
    assert agent_a.meter.summary()["train_flops"] == agent_b.meter.summary()["train_flops"]
    assert agent_a.meter.optimizer_steps == agent_b.meter.optimizer_steps


# ------------------------------------------------------------------ defaults are the plain path
def test_explicit_default_objects_run_bit_for_bit_like_the_config_built_ones():
    plain, n = dqn_config(), DQN_UPDATES
    local = {"gradient_sync": LocalSync(), "hyper": FixedHyperparameters()}
    _assert_same_run(_trained(plain, n), _trained(plain, n, action_rule=GreedyActions(), **local))
    sac = _sac_config()
    _assert_same_run(_trained(sac, 14), _trained(sac, 14, **local))
    ppo = tiny_config()
    _assert_same_run(_trained(ppo, 2), _trained(ppo, 2, gradient_sync=LocalSync(), count_steps=count_real_steps))


def test_the_meta_controller_injected_is_the_one_meta_kind_rmt_builds():
    config = dqn_config(meta={"kind": "rmt", "settings": {"interval": 2}}, dqn={"exploration": "boltzmann"})
    hp = config.dqn
    injected = MetaController(config.meta.built_settings(), hp.learning_rate, hp.gamma, hp.exploration_final_eps)
    built = _trained(config, DQN_UPDATES + 4)
    _assert_same_run(built, _trained(config, DQN_UPDATES + 4, hyper=injected, action_rule=BoltzmannActions()))
    assert "meta_learning_rate" in built[1][-1] and "temperature" in built[1][-1]


def test_fixed_hyperparameters_leave_the_plain_figures():
    agent, rows = _trained(dqn_config(), DQN_UPDATES)
    assert isinstance(agent.hyper, FixedHyperparameters) and agent.q_entropy is None  # nobody reads the entropy
    assert agent.techniques == []
    assert not any(key.startswith("meta_") for row in rows for key in row)
    assert {row["learning_rate"] for row in rows} == {agent.hp.learning_rate}
    agent.global_step = agent.hp.total_timesteps
    assert agent.epsilon() == pytest.approx(agent.hp.exploration_final_eps)


# ------------------------------------------------------------------ custom objects plug in
class HalvingController:
    """A controller of our own: halves the learning rate after every learning update."""

    technique = "halving_lr"
    uses_entropy = False

    def __init__(self) -> None:
        self.exploration: float | None = 0.5
        self.calls = 0

    def adjust(self, applied: list[Adjustment], entropy: float | None, value_loss: float | None) -> list[Adjustment]:
        if value_loss is None:
            return []
        self.calls += 1
        lr = 1e-3 * 0.5 ** (self.calls - 1)
        return [Adjustment("learning_rate", lr, lr / 2, "test"), Adjustment("exploration", 0.5, 0.5, "test")]

    def metrics(self) -> dict[str, float]:
        return {"halvings": float(self.calls)}

    def state_dict(self) -> dict[str, Any]:
        return {"calls": self.calls}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.calls = state["calls"]


@pytest.mark.parametrize("algo", ["dqn", "sac"])
def test_a_custom_hyper_controller_plugs_in_without_touching_the_learner(algo, capsys):
    config = dqn_config(dqn={"learning_rate": 1e-3}) if algo == "dqn" else _sac_config(sac={"learning_rate": 1e-3})
    controller = HalvingController()
    agent, rows = _trained(config, DQN_UPDATES if algo == "dqn" else 14, hyper=controller)
    assert controller.calls > 0 and rows[-1]["halvings"] == controller.calls
    expected = 1e-3 * 0.5**controller.calls
    assert rows[-1]["learning_rate"] == pytest.approx(expected)
    assert all(g["lr"] == pytest.approx(expected) for opt in agent.optimizers() for g in opt.param_groups)
    assert agent.state_dict()["meta"] == {"calls": controller.calls} and "halving_lr" in agent.techniques
    out = capsys.readouterr().out
    assert "meta: learning_rate" in out
    assert ("meta: exploration" in out) == (algo == "dqn")  # SAC takes no exploration adjustments
    if algo == "dqn":
        agent.global_step = agent.hp.total_timesteps  # the decay is over: the controller's value holds
        assert agent.epsilon() == 0.5 and agent.q_entropy is None


class FreezingSync:
    """A gradient sync of our own: records every call and zeroes the gradients (so nothing moves)."""

    def __init__(self) -> None:
        self.groups: list[str] = []

    def __call__(self, params, group: str = "policy") -> None:
        self.groups.append(group)
        for p in params:
            if p.grad is not None:
                p.grad.zero_()


def test_a_custom_gradient_sync_sees_every_step_and_owns_the_gradient():
    sync = FreezingSync()
    torch.manual_seed(3)
    config = dqn_config()
    agent = DQN(config, make_vec_env(config.env), CostMeter(), torch.device("cpu"), gradient_sync=sync)
    before = [p.detach().clone() for p in agent.policy.parameters()]
    agent.start(config.seed)
    for _ in range(DQN_UPDATES):
        agent.run_update()
    assert agent.gradient_updates > 0 and sync.groups == ["policy"] * agent.gradient_updates
    assert all(torch.equal(a, b) for a, b in zip(before, agent.policy.parameters(), strict=True))

    sync = FreezingSync()
    agent, _ = _trained(_sac_config(), 14, gradient_sync=sync)
    steps = agent.meter.optimizer_steps
    assert steps > 0 and sync.groups == ["critic", "actor", "temperature"] * steps

    sync = FreezingSync()
    agent, _ = _trained(tiny_config(), 2, gradient_sync=sync)
    assert sync.groups == ["policy"] * agent.meter.optimizer_steps


def test_build_learner_hands_the_sync_to_every_learner():
    sync = FreezingSync()
    for config in (dqn_config(), sac_config(), tiny_config()):
        env = make_vec_env(config.env, gamma=config.algo_config.gamma)
        assert build_learner(config, env, CostMeter(), torch.device("cpu"), sync).gradient_sync is sync


def test_ppo_books_its_env_steps_through_its_counter():
    agent, _ = _trained(tiny_config(), 1, count_steps=count_virtual_steps)
    assert agent.meter.real_env_steps == 0 and agent.meter.virtual_env_steps == agent.rollout_size
    agent, _ = _trained(tiny_config(), 1)
    assert agent.meter.real_env_steps == agent.rollout_size and agent.meter.virtual_env_steps == 0
