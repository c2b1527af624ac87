"""The cost meter counts the same items on both sides of a comparison (issue 19).

A pixel run and a latent run of the same game must report their FLOPs under the same three
kinds (train, inference, pretrain), with acting on both sides, and no counted phase may be
free: every phase with samples has measured FLOPs.
"""

from __future__ import annotations

import pytest
import torch

from frugalrl.config import validate_config
from frugalrl.cost import INFERENCE, PRETRAIN, TRAIN, CostMeter

from .test_latent import breakout


def test_kinds_add_up_to_the_total_and_an_unmeasured_phase_is_named():
    meter = CostMeter()
    layer = torch.nn.Linear(8, 4)
    x = torch.zeros(5, 8)
    meter.run_counted("act", lambda: layer(x), 5)
    meter.inference_samples += 5
    meter.run_counted("encode", lambda: layer(x), 5)
    meter.count("encode", 5)
    meter.run_counted("encoder_train", lambda: layer(x), 5)
    meter.count("encoder_train", 5)
    meter.add_pretrained("evaluator somewhere", 1000.0)
    per_sample = 2 * 8 * 4
    assert meter.inference_flops == 2 * 5 * per_sample
    assert meter.pretrain_flops == 5 * per_sample + 1000.0
    assert meter.total_flops == meter.train_flops + meter.inference_flops + meter.pretrain_flops
    assert meter.unmeasured_phases() == []
    meter.count("label", 3)  # counted, never measured: a gap the meter names
    meter.add_pretrained("encoder saved before costs were kept", None)
    assert meter.unmeasured_phases() == ["label", "pretrained encoder saved before costs were kept"]
    with pytest.raises(ValueError, match="cost kind"):
        meter.count("x", 1, "acting")


def test_absorbing_another_meter_keeps_each_phase_kind():
    lora, run = CostMeter(), CostMeter()
    layer = torch.nn.Linear(8, 4)
    lora.run_counted("act", lambda: layer(torch.zeros(2, 8)), 2)
    lora.inference_samples += 2
    lora.run_counted("forward", lambda: layer(torch.zeros(2, 8)), 2)
    lora.forward_samples += 2
    run.absorb(lora, "lora")
    assert run.kind_of("lora_act") == INFERENCE and run.kind_of("lora_forward") == TRAIN
    assert run.inference_flops == lora.inference_flops and run.train_flops == lora.train_flops


def _pixel_breakout():
    config = breakout().to_dict()
    config["rollout"], config["latent"] = {"kind": "real"}, {}
    config["policy"] = {"kind": "cnn"}
    config["name"] = "breakout-pixel-tiny"
    return validate_config(config, source="test")


def _kinds(summary: dict) -> dict[str, set[str]]:
    kinds: dict[str, set[str]] = {TRAIN: set(), INFERENCE: set(), PRETRAIN: set()}
    for phase, item in summary["flops_by_phase"].items():
        kinds[item["kind"]].add(phase)
    return kinds


@pytest.mark.slow  # three tiny Breakout runs, about 40 s
def test_latent_and_pixel_runs_count_the_same_items(tmp_path):
    from frugalrl.training import train

    pixel = train(_pixel_breakout(), tmp_path / "pixel")
    latent = train(breakout(), tmp_path / "latent")
    for summary in (pixel, latent):
        for phase, item in summary["flops_by_phase"].items():
            assert item["flops"] > 0, f"{phase} counted with {item['samples']} samples and no FLOPs"
        assert summary["total_flops"] == pytest.approx(
            summary["train_flops"] + summary["inference_flops"] + summary["pretrain_flops"]
        )
        assert summary["flops_by_phase"]["act"]["kind"] == INFERENCE  # acting is counted on both sides
        assert {"forward", "backward"} <= _kinds(summary)[TRAIN]
    latent_kinds = _kinds(latent)
    # Encoding real frames is acting, not learning; pretraining in the run is its own item.
    assert {"encode", "encode_start", "world_model_step"} <= latent_kinds[INFERENCE]
    assert {"encoder_train"} <= latent_kinds[PRETRAIN] and latent["pretrain_flops"] > 0
    assert pixel["pretrain_flops"] == 0 and pixel["pretrained_flops"] == {}

    # A run on the saved encoder lists its pretraining as a shared cost, by name, with its figure.
    reuse = breakout(encoder_from=str(tmp_path / "latent"))
    shared = train(reuse, tmp_path / "reuse")
    ((name, flops),) = shared["pretrained_flops"].items()
    assert name.startswith("encoder ") and flops == pytest.approx(latent["pretrain_flops"])
    assert shared["pretrain_flops"] == pytest.approx(flops)  # nothing pretrained again in this run
    assert all(item["flops"] > 0 for item in shared["flops_by_phase"].values())


@pytest.mark.parametrize("config_name", ["cartpole-pivot", "cartpole-dqn", "pendulum-sac"])
def test_no_counted_phase_is_free(config_name, tmp_path):
    """PPO's fused MLP step acts in NumPy, which torch's counter cannot see: it is counted on its torch twin."""
    from frugalrl.config import load_config
    from frugalrl.training import train

    from .conftest import REPO

    budget = {"cartpole-pivot": "ppo.total_timesteps=2048", "cartpole-dqn": "dqn.total_timesteps=1500",
              "pendulum-sac": "sac.total_timesteps=400"}[config_name]  # fmt: skip
    extra = ["sac.learning_starts=100"] if config_name == "pendulum-sac" else []
    config = load_config(REPO / "configs" / f"{config_name}.yaml",
                         [budget, *extra, "tracking.enabled=false", "eval.episodes=1"])  # fmt: skip
    summary = train(config, tmp_path / "run")
    free = [p for p, item in summary["flops_by_phase"].items() if item["flops"] <= 0]
    assert free == [] and summary["inference_flops"] > 0 and summary["train_flops"] > 0
