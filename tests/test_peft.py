"""PEFT: every method trains exactly its parameters, adapters round-trip, bad input is a clear error."""

from __future__ import annotations

import copy
import csv
import json
import pickle
import pickletools
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
import yaml

from frugalrl.algos.sac import SquashedGaussianActor, TwinCritic
from frugalrl.cli import main as cli_main
from frugalrl.config import EnvConfig, load_config, validate_config
from frugalrl.envs.factory import make_vec_env
from frugalrl.errors import ConfigError, EnvError
from frugalrl.peft.finetune import ACTOR_HEADS, CRITIC_HEADS
from frugalrl.peft.methods import adapt, merged, method_names, trainable_state
from frugalrl.peft.store import apply_adapter, save_adapter
from frugalrl.policy_store import load_policy_file, save_policy

from .conftest import CPU_IMAGE, REPO

ACTION = gym.spaces.Box(-3.0, 3.0, (2,), np.float32)


def actor() -> SquashedGaussianActor:
    torch.manual_seed(0)
    return SquashedGaussianActor(17, ACTION, [64, 64], (-20.0, 2.0))  # HalfCheetah's observation size


def step(network: torch.nn.Module, x: torch.Tensor) -> None:
    params = [p for p in network.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=1e-2)
    optimizer.zero_grad()
    action, logprob = network.sample(x)  # stochastic: the log-std head gets a gradient too
    (action.pow(2).sum() + logprob.sum()).backward()
    optimizer.step()


@pytest.mark.parametrize("method", method_names())
def test_trainable_count_matches_what_changes(method):
    """After optimiser steps, exactly the counted parameters have moved; the frozen ones have not.

    Two steps: zero-initialised factors (LoRA's B, the adapters' up-projection) give their
    partners no gradient on the first step.
    """
    network = actor()
    adaptation = adapt(network, method, None, ACTOR_HEADS)
    before = {name: t.clone() for name, t in network.state_dict().items()}
    torch.manual_seed(1)  # the same inputs whatever the peft version's initialisation drew
    x = 0.1 * torch.randn(64, 17)  # small inputs: a tanh-saturated action would give the mean head no gradient
    step(network, x)
    step(network, x)
    named = dict(network.named_parameters())
    changed = {n for n, t in network.state_dict().items() if not torch.equal(t, before[n]) and n in named}
    trainable = {n for n, p in named.items() if p.requires_grad}
    assert changed == trainable, method
    assert sum(named[n].numel() for n in changed) == adaptation.trainable
    frozen_state = {n for n in before if n not in trainable}
    assert all(torch.equal(network.state_dict()[n], before[n]) for n in frozen_state)
    assert 0 < adaptation.trainable_share <= 1.0
    if method != "full":
        assert adaptation.trainable < sum(p.numel() for p in actor().parameters())


def _tuned_copy(base: torch.nn.Module, method: str, options: dict | None, adapter: Path) -> torch.nn.Module:
    """A copy of ``base`` adapted by ``method`` whose every trainable tensor moved (standing in for
    training), its adapter saved to ``adapter``."""
    tuned = copy.deepcopy(base)
    adaptation = adapt(tuned, method, options, ACTOR_HEADS)
    with torch.no_grad():
        for p in tuned.parameters():
            if p.requires_grad:
                p.add_(torch.randn_like(p) * 0.1)
    save_adapter(adapter, method, adaptation.options, trainable_state(tuned))
    return tuned


@pytest.mark.parametrize("method", method_names())
def test_adapter_round_trips_onto_the_base_policy(method, tmp_path):
    """An adapter saved from a trained copy loads onto the saved base policy to identical outputs."""
    config = validate_config(
        {"algo": "sac", "env": {"id": "HalfCheetah-v5", "num_envs": 1}, "policy": {"hidden": [64, 64]}}
    )
    env = make_vec_env(config.env, training=False)
    from frugalrl.algos.sac import build_sac_actor
    from frugalrl.nets.policy import ExportedPolicy

    base = build_sac_actor(env.single_observation_space, env.single_action_space, config)
    env.close()
    spec = {"env": config.env.model_dump(mode="json"), "policy": config.policy.model_dump(mode="json")}
    save_policy(tmp_path / "base" / "policy.pt", ExportedPolicy(base, spec), config)
    tuned = _tuned_copy(base, method, None, tmp_path / "adapter.pt")
    policy, adapted_config = apply_adapter(str(tmp_path / "base"), str(tmp_path / "adapter.pt"))
    obs = torch.randn(8, 17)
    expected = tuned.sample(obs, deterministic=True)[0]
    assert torch.allclose(policy.act(obs), expected, atol=1e-6)
    assert not torch.allclose(ExportedPolicy(base, spec).act(obs), expected)
    save_policy(tmp_path / "tuned" / "policy.pt", policy, adapted_config)  # reloads with its adapter
    reloaded, reloaded_config = load_policy_file(tmp_path / "tuned")
    assert reloaded_config.policy.adapter.method == method
    assert torch.allclose(reloaded.act(obs), expected, atol=1e-6)


def test_an_adapter_applies_to_a_source_kept_without_its_policy_file(tmp_path):
    """benchmarks/artifacts keeps the PEFT source as config.yaml, checkpoint.pt and summary.json only: the
    comparison's last step (exporting the best method's policy) rebuilds the base from the checkpoint
    (before, it asked for policy.pt and the 90-run comparison ended in an error after its last run)."""
    from frugalrl.nets.policy import ExportedPolicy
    from frugalrl.peft.source import load_source

    kept = REPO / "benchmarks" / "artifacts" / "invdoublependulum-peft-source"
    assert not (kept / "policy.pt").exists()
    base = load_source(str(kept)).actor()
    tuned = _tuned_copy(base, "lora", {"rank": 2}, tmp_path / "adapter.pt")
    policy, config = apply_adapter(str(kept), str(tmp_path / "adapter.pt"))
    obs = torch.randn(8, 9)  # InvertedDoublePendulum-v5 observations
    expected = tuned.sample(obs, deterministic=True)[0]
    assert config.policy.adapter.method == "lora" and config.env.id == "InvertedDoublePendulum-v5"
    assert torch.allclose(policy.act(obs), expected, atol=1e-6)
    assert not torch.allclose(ExportedPolicy(base, policy.spec).act(obs), expected)


@pytest.mark.parametrize("method", method_names())
def test_merged_network_has_no_peft_layers_and_the_same_actions(method):
    """What is served (an MLflow model) is the adapted network with peft's layers folded in."""
    network = actor()
    adapt(network, method, None, ACTOR_HEADS)
    with torch.no_grad():  # stands in for training: every adapter tensor moves off its initialisation
        for p in network.parameters():
            if p.requires_grad:
                p.add_(torch.randn_like(p) * 0.1)
    served = merged(network)
    obs = torch.randn(8, 17)
    assert torch.allclose(served.sample(obs, deterministic=True)[0], network.sample(obs, deterministic=True)[0],
                          atol=1e-5)  # fmt: skip
    assert not any(type(m).__module__.startswith("peft") for m in served.modules()), method
    strings = {str(arg) for op, arg, _ in pickletools.genops(pickle.dumps(served)) if isinstance(arg, str)}
    assert not [s for s in strings if s == "peft" or s.startswith("peft.")], (
        method
    )  # nothing for an unpickler to import


def test_unknown_method_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown PEFT method.*allowed"):
        validate_config({"algo": "sac", "peft": {"targets": [{"name": "t"}], "methods": {"lorra": {}}}})
    with pytest.raises(ConfigError, match="unknown PEFT method"):
        adapt(actor(), "lorra", None, ACTOR_HEADS)


def test_rank_that_does_not_fit_is_a_config_error():
    with pytest.raises(ConfigError, match=r"rank 32 must be between 1 and 17.*peft.methods.lora"):
        adapt(actor(), "lora", {"rank": 32}, ACTOR_HEADS)
    with pytest.raises(ConfigError, match="block_size 5 must divide its 64 inputs"):
        adapt(actor(), "oft", {"block_size": 5}, ACTOR_HEADS)
    with pytest.raises(ConfigError, match="unknown option.*rnak"):
        adapt(actor(), "lora", {"rnak": 4}, ACTOR_HEADS)


def test_critic_heads_are_trainable_and_torso_is_not():
    critic = TwinCritic(17, 2, [64, 64])
    adapt(critic, "lora", {"rank": 2}, CRITIC_HEADS)
    trainable = [n for n, p in critic.named_parameters() if p.requires_grad]
    assert any(n.startswith("q1.1.") for n in trainable) and any("lora_" in n for n in trainable)
    assert not any(n.endswith("base_layer.weight") for n in trainable)


def test_dynamics_change_the_mujoco_model():
    env = make_vec_env(EnvConfig(id="InvertedPendulum-v5", num_envs=1), training=False)
    heavy = make_vec_env(
        EnvConfig(id="InvertedPendulum-v5", num_envs=1, dynamics={"mass_scale": 1.5, "friction_scale": 0.5}),
        training=False,
    )
    base_model = env.unwrapped.envs[0].unwrapped.model
    model = heavy.unwrapped.envs[0].unwrapped.model
    np.testing.assert_allclose(model.body_mass, base_model.body_mass * 1.5)
    np.testing.assert_allclose(model.geom_friction[:, 0], base_model.geom_friction[:, 0] * 0.5)
    with pytest.raises(EnvError, match="not a MuJoCo env"):
        make_vec_env(EnvConfig(id="CartPole-v1", num_envs=1, dynamics={"mass_scale": 2.0}))


@pytest.mark.slow
def test_compare_writes_table_plot_adapters_and_mlflow(tmp_path, capsys):
    """The quick config end to end (smaller still), then `peft apply` on one of its adapters."""
    overrides = ["sac.total_timesteps=300", "sac.learning_starts=100", "sac.batch_size=32", "peft.steps=120",
                 "peft.warmup_steps=60", "peft.eval_episodes=1", "eval.episodes=1",
                 "tracking.enabled=true"]  # fmt: skip
    out = tmp_path / "cmp"
    cli_main(["peft", "compare", "-c", str(REPO / "configs" / "peft-quick.yaml"), "-o", str(out),
              *[a for o in overrides for a in ("--set", o)]])  # fmt: skip
    rows = list(csv.DictReader((out / "peft_table.csv").open()))
    assert [r["method"] for r in rows] == ["full", "lora", "bitfit", "none", "scratch"]
    assert float(rows[3]["flops_pct_of_full"]) == 0 and float(rows[4]["trainable_pct"]) == 100.0
    assert float(rows[0]["return_pct_of_full"]) == pytest.approx(100.0)
    assert float(rows[2]["trainable_pct"]) < float(rows[1]["trainable_pct"]) < 100.0
    assert (out / "peft_plot.png").stat().st_size > 1000
    assert "| heavy-pole | lora |" in (out / "peft_table.md").read_text()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["best_method"] in ("lora", "bitfit")  # never a reference
    assert not (out / "adapters" / "heavy-pole" / "scratch").exists()  # a reference saves no adapter
    best, _ = load_policy_file(out / "best")
    assert best.actor_critic is not None

    import mlflow

    run = mlflow.get_run(summary["mlflow_run_id"])
    assert "heavy-pole.lora.return_pct_of_full" in run.data.metrics
    artifacts = {
        a.path for a in mlflow.MlflowClient().list_artifacts(run.info.run_id, "adapters/heavy-pole/lora/seed1")
    }
    assert "adapters/heavy-pole/lora/seed1/adapter.pt" in artifacts

    adapter_uri = f"runs:/{run.info.run_id}/adapters/heavy-pole/lora/seed1/adapter.pt"
    cli_main(["peft", "apply", str(out / "source"), adapter_uri, "--out", str(tmp_path / "applied")])
    applied, config = load_policy_file(tmp_path / "applied")
    assert config.policy.adapter.method == "lora"
    sets = [a for o in overrides for a in ("--set", o)]
    before = (out / "peft_runs.csv").read_text()
    cli_main(["peft", "compare", "-c", str(REPO / "configs" / "peft-quick.yaml"), "-o", str(out), "--resume", *sets])
    assert (out / "peft_runs.csv").read_text() == before  # every run was finished: nothing re-run, nothing lost
    with pytest.raises(SystemExit) as exc:  # a second comparison into the same directory is refused
        cli_main(["peft", "compare", "-c", str(REPO / "configs" / "peft-quick.yaml"), "-o", str(out)])
    assert exc.value.code == 2
    assert "already holds a PEFT comparison" in capsys.readouterr().err


def test_finetune_runs_through_the_loop_and_the_learner_steps_only_what_trains(tmp_path):
    """One metrics.jsonl row per SAC update after the warm-up; the optimizers hold the adapted parameters only."""
    from frugalrl.cost import CostMeter
    from frugalrl.peft.finetune import FinetuneSAC, adapted_networks, finetune
    from frugalrl.peft.source import load_source
    from frugalrl.training import train

    config = load_config(REPO / "configs" / "peft-quick.yaml", ["sac.total_timesteps=150", "sac.learning_starts=100",
                         "sac.batch_size=32", "peft.steps=60", "peft.warmup_steps=40", "peft.eval_episodes=1",
                         "eval.episodes=1"])  # fmt: skip
    train(config.model_copy(update={"peft": None}), tmp_path / "source", interactive=False)
    source = load_source(str(tmp_path / "source"))
    result = finetune(source, config.peft, "lora", {"rank": 2}, config.peft.targets[0], 1, out=tmp_path / "ft")
    rows = [json.loads(line) for line in (tmp_path / "ft" / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == list(range(41, 61)) and result.env_steps == 60
    assert all("critic_loss" in row and row["learning_rate"] == config.peft.learning_rate for row in rows)

    env = make_vec_env(config.env, gamma=config.sac.gamma)
    networks, adaptation, critic = adapted_networks(source, config, env, config.peft, "lora", {"rank": 2})
    learner = FinetuneSAC(config, env, CostMeter(), torch.device("cpu"), networks, warmup_steps=0)
    env.close()

    def stepped(optimizer: torch.optim.Optimizer) -> int:
        return sum(p.numel() for group in optimizer.param_groups for p in group["params"])

    everything = sum(p.numel() for p in learner.policy.parameters())
    assert stepped(learner.actor_optimizer) == adaptation.trainable < everything
    assert stepped(learner.critic_optimizer) == critic.trainable
    torch.testing.assert_close(learner.log_alpha.detach(), source.agent_state["log_alpha"])


def test_weak_source_is_refused(tmp_path):
    config = load_config(REPO / "configs" / "peft-quick.yaml", ["sac.total_timesteps=200", "sac.learning_starts=100",
                         "eval.episodes=1", "peft.min_source_return=100000"])  # fmt: skip
    from frugalrl.peft.compare import compare

    with pytest.raises(ConfigError, match="train it longer"):
        compare(config, tmp_path / "weak")
    assert (tmp_path / "weak" / "source" / "policy.pt").exists()  # the trained source is kept


def test_configs_validate():
    for name in ("peft-quick.yaml", "halfcheetah-peft.yaml"):
        config = load_config(REPO / "configs" / name)
        assert config.peft is not None and config.algo == "sac"
    data = yaml.safe_load((REPO / "configs" / "halfcheetah-peft.yaml").read_text())
    assert len(data["peft"]["methods"]) == len(method_names()) == 13


def test_peft_config_compiles_to_the_peft_pipeline(tmp_path):
    output = tmp_path / "pipeline.yaml"
    config = str(REPO / "configs" / "peft-quick.yaml")
    cli_main(["pipeline", "compile", "--config", config, "-o", str(output), "--image", CPU_IMAGE])
    ir = next(yaml.safe_load_all(output.read_text()))  # the IR; the cluster's platform spec follows
    assert {e["container"]["image"] for e in ir["deploymentSpec"]["executors"].values()} == {CPU_IMAGE}
    assert ir["pipelineInfo"]["name"] == "frugalrl-peft"
    tasks = ir["root"]["dag"]["tasks"]
    assert tasks["peft-compare"]["dependentTasks"] == ["train"]
    assert tasks["evaluate-and-register-2"]["dependentTasks"] == ["peft-compare"]  # the adapted policy
    outputs = ir["components"]["comp-peft-compare"]["outputDefinitions"]["artifacts"]
    assert outputs["best"]["artifactType"]["schemaTitle"] == "system.Model"
    assert outputs["table"]["artifactType"]["schemaTitle"] == "system.Markdown"


def test_every_method_builds_on_the_halfcheetah_critics():
    """The critics have two torsos: layer selection (OFT: hidden layers only) must hold for both."""
    for method in method_names():
        critic = TwinCritic(17, 6, [256, 256])
        adaptation = adapt(critic, method, None, CRITIC_HEADS)
        assert 0 < adaptation.trainable <= adaptation.base_parameters


def _run(method: str, seed: int, ret: float, curve: list | None = None, **costs: float) -> dict:
    row = {
        "target": "t",
        "method": method,
        "seed": seed,
        "eval_mean": ret,
        "source_eval_mean": 90.0,
        "trainable": 10,
        "trainable_share": 0.1,
        "train_flops": 100.0,
        "train_s": 10.0,
        "curve": curve or [],
    }
    return {**row, **costs}  # fmt: skip


def test_aggregate_measures_against_full_fine_tuning_and_the_untrained_source():
    """% of the drop recovered is against `none`; steps to 90% of full read each run's training curve."""
    from frugalrl.peft.table import aggregate, best_method, markdown

    rise = [[100, 10.0], [200, 50.0], [300, 95.0], [400, 95.0], [500, 95.0]]  # window 3 reaches 90 at step 500
    rows = [_run("full", s, 100.0, rise) for s in (1, 2, 3)]
    rows += [
        _run("lora", s, r, [[100, 10.0]] * 4, train_flops=20.0, train_s=4.0)
        for s, r in ((1, 70.0), (2, 60.0), (3, 80.0))
    ]
    rows += [_run("none", s, 40.0, train_flops=0.0, train_s=0.0, trainable=0, trainable_share=0.0) for s in (1, 2, 3)]
    rows += [_run("scratch", s, 120.0, rise, trainable=100, trainable_share=1.0) for s in (1, 2, 3)]
    table = {r["method"]: r for r in aggregate(rows, 100.0, source_flops=1000.0, source_train_s=200.0)}
    assert table["lora"]["drop_recovered_pct"] == pytest.approx(100 * (70 - 40) / (100 - 40))
    assert (table["lora"]["eval_low"], table["lora"]["eval_mean"], table["lora"]["eval_high"]) == (60.0, 70.0, 80.0)
    assert table["full"]["steps_to_90pct_of_full"] == 500 and table["lora"]["steps_to_90pct_of_full"] == float("inf")
    assert table["none"]["steps_to_90pct_of_full"] is None and table["none"]["drop_recovered_pct"] == 0
    assert table["lora"]["time_pct_of_source_training"] == pytest.approx(2.0)
    assert table["lora"]["flops_pct_of_source_training"] == pytest.approx(2.0)
    assert table["lora"]["forgetting_pct"] == pytest.approx(10.0)
    assert best_method(list(table.values())) == "lora"  # scratch scores higher, and is no adaptation method
    assert "| t | lora | 3 | 70.0 [60.0, 80.0] | 70.0 | 50.0 | not reached |" in markdown(
        list(table.values()), 100.0, 10
    )


def test_steps_to_reach_needs_a_window_of_episodes():
    from frugalrl.peft.table import steps_to_reach

    spike = [[10, 0.0], [20, 100.0], [30, 0.0], [40, 100.0], [50, 100.0], [60, 100.0]]
    assert steps_to_reach(spike, 90.0) == 60  # one lucky episode is not reaching it
    assert steps_to_reach(spike, 90.0, window=1) == 20
    assert steps_to_reach([], 1.0) == float("inf")


def test_runs_keep_their_curves_and_old_rows_read_without_one(tmp_path):
    from frugalrl.peft.table import RUN_FIELDS, read_runs, write_csv

    row = {**_run("full", 1, 5.0), "critic_trainable": 3, "env_steps": 40, "curve": json.dumps([[12, 1.5], [40, 3.0]])}
    write_csv(tmp_path / "runs.csv", [row], RUN_FIELDS)
    assert read_runs(tmp_path / "runs.csv")[0]["curve"] == [[12, 1.5], [40, 3.0]]
    write_csv(tmp_path / "old.csv", [row], [f for f in RUN_FIELDS if f != "curve"])
    assert "curve" not in read_runs(tmp_path / "old.csv")[0]


def test_references_are_strict_and_at_their_default_hash_as_left_out():
    base = load_config(REPO / "configs" / "peft-quick.yaml", ["peft.references=[]"])
    data = base.to_dict()
    del data["peft"]["references"]  # a config that leaves them out gets the default, and its hash
    assert validate_config(data).hash() == base.hash()
    with pytest.raises(ConfigError, match="each reference once"):
        load_config(REPO / "configs" / "peft-quick.yaml", ["peft.references=[none, none]"])
    with pytest.raises(ConfigError, match="references"):
        load_config(REPO / "configs" / "peft-quick.yaml", ["peft.references=[lora]"])


def test_references_train_from_scratch_and_evaluate_the_source_as_it_is(tmp_path):
    """scratch: fresh networks through the loop, random actions first, a learning curve; none: no cost."""
    from frugalrl.peft.finetune import from_scratch, untrained
    from frugalrl.peft.source import load_source
    from frugalrl.training import train

    config = load_config(REPO / "configs" / "peft-quick.yaml", ["sac.total_timesteps=150", "sac.learning_starts=100",
                         "sac.batch_size=32", "peft.steps=80", "peft.warmup_steps=40", "peft.eval_episodes=1",
                         "eval.episodes=1"])  # fmt: skip
    train(config.model_copy(update={"peft": None}), tmp_path / "source", interactive=False)
    source = load_source(str(tmp_path / "source"))
    assert source.train_s is not None and source.train_s > 0
    target = config.peft.targets[0]
    scratch = from_scratch(source, config.peft, target, 1, out=tmp_path / "scratch")
    rows = [json.loads(line) for line in (tmp_path / "scratch" / "metrics.jsonl").read_text().splitlines()]
    assert rows[0]["step"] == 1 and scratch.env_steps == 80 and scratch.train_flops > 0
    assert "critic_loss" not in rows[38] and "critic_loss" in rows[40]  # learning starts after the warm-up
    assert scratch.adaptation.trainable_share == 1.0 and scratch.adapter_state  # the whole new policy
    steps = [step for step, _ in scratch.curve]
    assert scratch.curve and steps == sorted(steps) and steps[-1] <= 80
    none = untrained(source, config.peft, target, 1)
    assert (none.train_flops, none.train_s, none.env_steps, none.adaptation.trainable) == (0.0, 0.0, 0, 0)
    assert none.curve == [] and json.loads(none.row()["curve"]) == []


def test_the_best_method_is_named_only_where_it_beats_no_fine_tuning():
    from frugalrl.peft.table import best_line

    def row(method: str, value: float) -> dict:
        return {"method": method, "eval_mean": value, "target": "heavy"}

    solved = [row("none", 1000.0), row("full", 1000.0), row("bitfit", 1000.0)]
    assert best_line(solved, "bitfit").startswith("the source already solves the target: no fine-tuning returns 1000.0")
    helped = [row("none", 120.0), row("lora", 640.0)]
    assert best_line(helped, "lora") == "lora (return 640.0 against 120.0 without fine-tuning)"
    assert best_line([row("lora", 640.0)], "lora") == "lora (return 640.0)"
    assert best_line([], None) == "no parameter-efficient method ran"


def test_the_registered_policy_is_the_untouched_source_where_no_method_beats_it(tmp_path):
    """A fine-tune that plays worse than its source is not what ``best/`` (and so the registry) receives: the
    source as it is, on the target's physics, is."""
    from frugalrl.peft.compare import _export_best
    from frugalrl.peft.source import load_source
    from frugalrl.peft.table import registered_method

    def row(method: str, value: float, target: str = "heavy") -> dict:
        return {"method": method, "eval_mean": value, "target": target}

    solved = [row("none", 1000.0), row("full", 1000.0), row("bitfit", 197.3), row("lora", 135.3)]
    assert registered_method(solved, "bitfit") == "none"
    assert registered_method([row("none", 1000.0), row("lora", 1000.0)], "lora") == "none"  # a tie: nothing gained
    helped = [row("none", 120.0), row("lora", 640.0), row("none", 900.0, "light"), row("lora", 500.0, "light")]
    assert registered_method(helped, "lora") == "lora"  # the mean over targets, as best_line says it
    assert registered_method([row("lora", 640.0)], "lora") == "lora"  # no `none` reference ran
    assert registered_method([], None) is None

    kept = REPO / "benchmarks" / "artifacts" / "invdoublependulum-peft-source"
    target = load_config(REPO / "configs" / "invdoublependulum-peft.yaml").peft.targets[0]
    assert _export_best(str(kept), tmp_path, "none", target) is not None
    reloaded, reloaded_config = load_policy_file(tmp_path / "best")
    obs = torch.randn(8, 9)
    expected = load_source(str(kept)).actor().sample(obs, deterministic=True)[0]
    assert reloaded_config.policy.adapter is None and torch.allclose(reloaded.act(obs), expected, atol=1e-6)
    assert reloaded_config.env.dynamics == target.dynamics
    assert reloaded.spec["env"]["dynamics"] == target.dynamics.model_dump(mode="json")


def test_compare_refuses_an_out_that_holds_a_training_run_and_changes_nothing(tmp_path, capsys):
    from frugalrl.cli import main

    from .conftest import REPO, tiny_config

    run = tmp_path / "run"
    for name, text in (("config.yaml", tiny_config().to_yaml()), ("summary.json", '{"eval_mean": 1.0}\n')):
        (run / name).parent.mkdir(exist_ok=True)
        (run / name).write_text(text)
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    with pytest.raises(SystemExit) as exited:
        main(["peft", "compare", "--config", str(REPO / "configs" / "peft-quick.yaml"), "--out", str(run)])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "is not empty" in err and err.count("\n") == 1
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before
