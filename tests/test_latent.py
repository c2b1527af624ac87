"""The latent curriculum: frame datasets, encoder, world model, virtual env, scheduler, probe."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from frugalrl.cli import main as cli_main
from frugalrl.config import CurriculumConfig, load_config, validate_config
from frugalrl.cost import CostMeter
from frugalrl.envs.factory import make_vec_env
from frugalrl.errors import ConfigError
from frugalrl.latent.curriculum import CurriculumScheduler
from frugalrl.latent.dataset import collect_frames, load_dataset
from frugalrl.latent.encoder import FrameDecoder, FrameEncoder
from frugalrl.latent.envs import EncodedVectorEnv, VirtualVectorEnv
from frugalrl.latent.pretrain import encoder_step_loss, train_latent_models
from frugalrl.latent.probe import labelled_frames, linear_probe, r2_scores
from frugalrl.latent.store import LatentModels, load_latent
from frugalrl.latent.train import warn_batch_ratio
from frugalrl.latent.world_model import LatentWorldModel
from frugalrl.pretraining.latent import LATENT

from .conftest import CPU_IMAGE, REPO


def breakout(**latent) -> object:
    return validate_config(
        {
            "name": "breakout-tiny",
            "env": {"id": "ALE/Breakout-v5", "num_envs": 2},
            "policy": {"kind": "mlp", "hidden": [16]},
            "ppo": {"total_timesteps": 512, "num_steps": 32, "batch_size": 16, "update_epochs": 1},
            "rollout": {"kind": "latent"},
            "latent": {"collect_steps": 256, "collect_envs": 2, "pretrain_updates": 3,
                       "batch_size": 8, "virtual_num_envs": 4, "virtual_batch_size": 64, "real_batch_size": 16,
                       "world_model": {"hidden": [32], "epochs": 1, "refresh_every_updates": 2, "refresh_steps": 2},
                       **latent},
            "eval": {"episodes": 1, "deterministic": False},
            "tracking": {"enabled": False},
        },
        source="test",
    )  # fmt: skip


@pytest.fixture(scope="module")
def frames():
    return collect_frames(breakout(), steps=400, seed=5)


# ------------------------------------------------------------------ dataset
def test_dataset_round_trip_and_hash_sees_one_changed_pixel(frames, tmp_path):
    sha = frames.save(tmp_path / "d.npz")
    loaded = load_dataset(tmp_path / "d.npz")
    assert loaded.content_hash() == sha
    assert loaded.frames.dtype == np.uint8 and loaded.frames.shape[2:] == (84, 84)
    assert loaded.ram.shape[-1] == 128
    loaded.frames[1, 7, 40, 40] ^= 1
    assert loaded.content_hash() != sha


def test_stacks_are_zero_padded_before_an_episode_starts(frames):
    stacked = frames.stacked(np.array([0, 0]), np.array([0, 5]), 4)
    assert stacked.shape == (2, 4, 84, 84)
    assert not stacked[0, :3].any() and stacked[0, 3].any()  # first frame of the episode: 3 zero frames
    assert (stacked[1, 0] == frames.frames[0, 2]).all() and (stacked[1, 3] == frames.frames[0, 5]).all()


def test_corrupt_dataset_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(Exception, match="corrupt"):
        load_dataset(bad)


# ------------------------------------------------------------------ encoder and world model
def test_gradient_checkpointing_gives_the_same_gradients(frames):
    config = breakout(objective="dynamics")
    grads = []
    for checkpointing in (False, True):
        torch.manual_seed(0)
        encoder = FrameEncoder(4, 84, 32, checkpointing=checkpointing)
        models = LatentModels(encoder, FrameDecoder(encoder), LatentWorldModel(32, 4, [32]))
        batch = {
            "obs": torch.as_tensor(frames.stacked(np.zeros(6, int), np.arange(6) + 3, 4)),
            "next_obs": torch.as_tensor(frames.stacked(np.zeros(6, int), np.arange(6) + 4, 4)),
            "action": torch.as_tensor(frames.actions[0, 3:9]),
            "reward": torch.as_tensor(frames.rewards[0, 3:9]),
            "done": torch.zeros(6, dtype=torch.bool),
        }
        encoder_step_loss(models, batch, config).backward()
        grads.append(encoder.convs[0].weight.grad.clone())
    torch.testing.assert_close(grads[0], grads[1])


def test_training_reports_held_out_figures(frames):
    models, metrics = train_latent_models(breakout(objective="motion"), frames, CostMeter())
    for key in ("psnr_db", "latent_error_1", "latent_error_10", "reward_accuracy", "compression_ratio"):
        assert key in metrics
    assert metrics["compression_ratio"] == 4 * 84 * 84 / 32
    assert metrics["pretrain_flops"] > 0


# ------------------------------------------------------------------ the two envs, one interface
def _check_vector_env(env, steps: int = 40) -> None:
    """What PPO relies on: shapes, dtypes, episode ends, final observations, episode statistics."""
    n, dim = env.num_envs, env.single_observation_space.shape[0]
    obs, _ = env.reset(seed=1)
    assert tuple(obs.shape) == (n, dim) and torch.as_tensor(obs).dtype == torch.float32
    saw_end = False
    for _ in range(steps):
        actions = np.array([env.single_action_space.sample() for _ in range(n)])
        obs, reward, terminated, truncated, info = env.step(actions)
        assert tuple(obs.shape) == (n, dim)
        assert tuple(torch.as_tensor(reward).shape) == (n,)
        ended = torch.as_tensor(terminated) | torch.as_tensor(truncated)
        if ended.any():
            saw_end = True
            assert tuple(torch.as_tensor(info["final_obs"]).shape) == (n, dim)
            assert "_episode" in info and "r" in info["episode"]
    assert saw_end
    assert float(torch.as_tensor(obs).abs().max()) <= 1.0


def test_virtual_and_real_env_pass_the_same_interface_test():
    config = breakout()
    encoder = FrameEncoder(4, 84, 32)
    real_config = config.env.model_copy(update={"atari": config.env.atari.model_copy(update={"max_episode_steps": 30})})
    real = EncodedVectorEnv(make_vec_env(real_config), encoder, CostMeter())
    try:
        _check_vector_env(real)
    finally:
        real.close()
    virtual = VirtualVectorEnv(LatentWorldModel(32, 4, [32]), torch.rand(50, 32) * 2 - 1, 3, horizon=7)
    _check_vector_env(virtual)


def test_encoded_env_counts_every_frame_and_its_flops_once():
    config = breakout()
    meter = CostMeter()
    env = EncodedVectorEnv(make_vec_env(config.env.model_copy(update={"num_envs": 2})), FrameEncoder(4, 84, 32), meter)
    try:
        env.reset(seed=0)
        for _ in range(3):
            env.step(np.zeros(2, dtype=np.int64))
    finally:
        env.close()
    assert meter.aux_samples["encode"] == 8  # reset + 3 steps, 2 games (no game ends in 3 steps)
    assert meter.flops_per_sample["encode"] > 1e6  # the Nature convolutions: millions of FLOPs a frame


def test_virtual_noise_changes_imagined_latents_only_when_set():
    wm = LatentWorldModel(8, 2, [16])
    torch.nn.init.constant_(wm.done.bias, -10.0)  # no imagined episode ends in this step
    starts = torch.zeros(5, 8)
    quiet, noisy = VirtualVectorEnv(wm, starts, 5, 10), VirtualVectorEnv(wm, starts, 5, 10, noise=0.1)
    for env in (quiet, noisy):
        env.reset(seed=0)
    a = np.zeros(5, dtype=int)
    assert torch.equal(quiet.step(a)[0], wm(starts, torch.as_tensor(a)).next_latent)
    assert not torch.equal(noisy.step(a)[0], wm(starts, torch.as_tensor(a)).next_latent)


# ------------------------------------------------------------------ curriculum
def test_stage_scheduler_yields_the_configured_fractions():
    config = CurriculumConfig()  # the seed's 70/30 -> 30/70 -> 100% real
    total, real_rollout, virtual_rollout = 100_000, 500, 700
    scheduler = CurriculumScheduler(config, total)
    real = 0
    while real < total:
        source = scheduler.next_source(real)
        scheduler.record(source, real_rollout if source == "real" else virtual_rollout, real)
        real += real_rollout if source == "real" else 0
    summary = scheduler.summary()
    for i, stage in enumerate(config.stages, start=1):
        r, v = summary[f"stage{i}_real_steps"], summary[f"stage{i}_virtual_steps"]
        assert r == pytest.approx(stage.real_share * total, abs=real_rollout)
        assert v / (r + v) == pytest.approx(stage.virtual_fraction, abs=0.02)


def test_adaptive_scheduler_moves_to_real_data_when_the_score_is_high():
    config = CurriculumConfig(mode="adaptive", target_score=100.0, adaptive_virtual_fractions=(0.5, 0.1))
    scheduler = CurriculumScheduler(config, 10_000)
    assert scheduler.virtual_fraction(0) == 0.5
    scheduler.observe_score(85.0)
    assert scheduler.virtual_fraction(0) == 0.1
    scheduler.observe_score(20.0)
    assert scheduler.virtual_fraction(0) == 0.5


def test_curriculum_config_errors_and_ratio_warning():
    with pytest.raises(ConfigError, match="sum to 1"):
        validate_config({"latent": {"curriculum": {"stages": [{"virtual_fraction": 0.5, "real_share": 0.4}]}}})
    with pytest.raises(ConfigError, match="target_score"):
        validate_config({"latent": {"curriculum": {"mode": "adaptive"}}})
    with pytest.raises(ConfigError, match="virtual_fraction"):
        validate_config({"latent": {"curriculum": {"stages": [{"virtual_fraction": 1.0, "real_share": 1.0}]}}})
    assert warn_batch_ratio(breakout(virtual_batch_size=64, real_batch_size=16)) is None
    assert "outside" in warn_batch_ratio(breakout(virtual_batch_size=16, real_batch_size=16))


def test_total_real_steps_sets_the_budget():
    config = load_config(REPO / "configs" / "breakout-latent.yaml", ["total_real_steps=50000"])
    assert config.ppo.total_timesteps == 50_000


# ------------------------------------------------------------------ probe
def test_probe_labels_drop_frames_without_the_ball(frames):
    obs, labels, _, names = labelled_frames(frames, "breakout")
    assert names == ["ball_x", "ball_y", "player_x"]
    assert len(obs) == len(labels) and len(obs) <= len(frames)
    assert (labels[:, 0] > 0).all() and (labels[:, 1] > 0).all()


def test_linear_probe_recovers_a_linear_target():
    z = torch.randn(400, 8)
    y = z[:, :2] @ torch.tensor([[1.0, -2.0], [0.5, 3.0]]) + 0.3
    pred = linear_probe(z[:300], y[:300], z[300:])
    assert min(r2_scores(pred, y[300:])) > 0.99
    assert max(r2_scores(torch.zeros(100, 2) + y[300:].mean(0), y[300:])) < 1e-6


def test_probe_ceiling_is_computed_once_per_frame_set_then_cached(tmp_path, monkeypatch):
    from frugalrl.latent import probe

    monkeypatch.setenv("FRUGALRL_CACHE_DIR", str(tmp_path / "cache"))
    config = breakout()
    encoder = FrameEncoder(config.env.atari.stack_num, config.env.atari.img_size, latent_dim=8)
    kwargs = {"steps": 600, "seed": 5, "probe_steps": 5, "ceiling_steps": 3}
    first = probe.probe_latent(encoder, config, **kwargs)
    assert first["ceiling_cached"] is False and "ball_ceiling_r2" in first

    def no_cnn(*args, **kwargs):
        raise AssertionError("the ceiling was trained again on the same frames")

    monkeypatch.setattr(probe, "cnn_ceiling", no_cnn)
    again = probe.probe_latent(encoder, config, **kwargs)
    assert again["ceiling_cached"] is True and again["ceiling_key"] == first["ceiling_key"]
    assert {k: v for k, v in again.items() if "cnn" in k or "ceiling_r2" in k} == {
        k: v for k, v in first.items() if "cnn" in k or "ceiling_r2" in k
    }
    # another frame set (seed) is another key; a pod with an empty disk finds the figures in MLflow
    assert probe.ceiling_key(config, 600, 6, 3) != first["ceiling_key"]
    (tmp_path / "cache" / "probe-ceiling" / f"{first['ceiling_key']}.json").write_text("{not json")
    asked = []
    found = probe.probe_latent(encoder, config, ceiling_lookup=lambda key: asked.append(key) or {
        k: first[k] for k in first if k.startswith("r2_cnn_")}, **kwargs)  # fmt: skip
    assert asked == [first["ceiling_key"]] and found["ball_ceiling_r2"] == first["ball_ceiling_r2"]


def test_a_ceiling_logged_by_an_earlier_encoder_run_is_found_by_its_key():
    import mlflow

    from frugalrl.latent.pretrain import _ceiling_in_mlflow
    from frugalrl.tracking.store import check_tracking

    mlflow.set_tracking_uri(check_tracking())
    mlflow.set_experiment("earlier-encoders")  # this test's store: not an experiment id cached by another test
    with mlflow.start_run(run_name="earlier-encoder"):
        mlflow.set_tag("frugalrl.probe.ceiling_key", "k123")
        mlflow.log_metrics({"r2_cnn_ball_x": 0.9, "r2_cnn_ball_y": 0.8, "psnr_db": 30.0})
    assert _ceiling_in_mlflow("k123") == {"r2_cnn_ball_x": 0.9, "r2_cnn_ball_y": 0.8}
    assert _ceiling_in_mlflow("another-frame-set") is None


# ------------------------------------------------------------------ commands
@pytest.mark.slow
def test_pretrain_encoder_registers_and_encoder_from_loads_it(tmp_path, capsys):
    config_file = tmp_path / "breakout.yaml"
    data = breakout().to_dict()
    data["tracking"]["enabled"] = True
    data["latent"]["champion_min_psnr_db"] = 0.0  # a 3-update encoder: the registry's floor would keep it out
    config_file.write_text(json.dumps(data))
    cli_main(["pretrain", "encoder", "--config", str(config_file), "--out", str(tmp_path / "enc"), "--no-probe"])
    summary = json.loads((tmp_path / "enc" / "summary.json").read_text())
    assert summary["registered_model"] == "breakout-encoder" and summary["psnr_db"] > 0
    # everything this command does is pretraining, and its cost travels with the encoder
    assert summary["total_flops"] == summary["pretrain_flops"] > 0 and summary["train_flops"] == 0
    assert load_latent(tmp_path / "enc").metadata["pretrain_flops"] == summary["total_flops"]
    # the pipeline's pretrain step reports the stage's metrics: its cost among them, not a train_flops of 0
    assert "pretrain_flops" in LATENT.metrics and "train_flops" not in LATENT.metrics
    assert {key: summary[key] for key in LATENT.metrics if key in summary}["pretrain_flops"] > 0
    assert len(summary["dataset_sha256"]) == 64
    import mlflow

    signature = mlflow.models.get_model_info(summary["model_uri"]).signature  # frames in, a latent out
    assert signature is not None and "uint8" in str(signature.inputs)
    local = load_latent(tmp_path / "enc")
    remote = load_latent("models:/breakout-encoder@champion")
    for key, value in local.encoder.state_dict().items():
        torch.testing.assert_close(remote.encoder.state_dict()[key], value)
    assert "registered breakout-encoder version 1" in capsys.readouterr().out

    png = tmp_path / "latent.png"
    cli_main(["visualize-latent", "--encoder", str(tmp_path / "enc"), "--env", "ALE/Breakout-v5", "--out", str(png)])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from mlflow import MlflowClient

    runs = MlflowClient().search_runs(
        [e.experiment_id for e in MlflowClient().search_experiments()], "tags.mlflow.runName = 'visualize-latent'"
    )
    assert runs and MlflowClient().list_artifacts(runs[0].info.run_id, "latent")[0].path == "latent/latent.png"


def test_missing_encoder_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["probe-latent", "--encoder", str(tmp_path / "none"), "--game", "breakout", "--out", str(tmp_path)])
    assert exit_info.value.code == 2


def test_curriculum_run_completes_every_stage(tmp_path):
    from frugalrl.training import train

    summary = train(breakout(), tmp_path / "run")
    assert summary["techniques"] == ["latent_curriculum"]
    assert summary["real_env_steps"] >= 512
    assert summary["virtual_env_steps"] > 0
    assert summary["stage1_virtual_steps"] > 0 and summary["stage2_virtual_steps"] > 0
    assert summary["stage3_real_steps"] > 0 and summary["stage3_virtual_steps"] == 0
    assert (tmp_path / "run" / "encoder.pt").is_file() and (tmp_path / "run" / "policy.pt").is_file()
    from frugalrl.policy_store import load_policy

    policy = load_policy(str(tmp_path / "run"))
    frames = torch.zeros(2, 4, 84, 84, dtype=torch.uint8)
    assert policy.act(frames).shape == (2,)
    assert summary["wm_gate"] in ("passed", "failed", "not measurable") and summary["wm_gate_reason"]


def test_a_standardised_policy_input_is_fitted_on_the_start_latents_and_saved_with_the_policy(tmp_path):
    from frugalrl.nets.policy import InputStandardiser
    from frugalrl.policy_store import load_policy
    from frugalrl.training import train

    all_real = {"stages": [{"virtual_fraction": 0.0, "real_share": 1.0}]}
    train(breakout(curriculum=all_real), tmp_path / "raw")
    assert load_policy(str(tmp_path / "raw")).actor_critic.input_norm is None  # the default stays as it was

    train(breakout(curriculum=all_real, policy_input="standardised"), tmp_path / "std")
    policy = load_policy(str(tmp_path / "std"))
    norm = policy.actor_critic.input_norm
    assert isinstance(norm, InputStandardiser)
    # fitted on real latents of this game: what the frozen encoder makes of frames from the same random play
    data = collect_frames(breakout(), steps=256, seed=1)
    games, times = np.meshgrid(np.arange(data.num_games), np.arange(data.steps_per_game), indexing="ij")
    stacks = torch.as_tensor(data.stacked(games.ravel(), times.ravel(), 4))
    with torch.no_grad():
        z = norm(policy.encoder(stacks))
    assert z.mean(0).abs().max() < 0.5 and 0.5 < float(z.std(0).median()) < 2.0


def test_the_input_standardiser_gives_unit_spread_and_leaves_a_constant_feature_at_zero():
    from frugalrl.nets.policy import InputStandardiser

    torch.manual_seed(0)
    samples = torch.stack([0.3 + 0.02 * torch.randn(4000), -0.7 + 0.1 * torch.randn(4000), torch.full((4000,), 0.5)], 1)
    norm = InputStandardiser.fit(samples, min_scale=1e-3, clip=10.0)
    out = norm(samples)
    torch.testing.assert_close(out[:, :2].mean(0), torch.zeros(2), atol=1e-4, rtol=0)
    torch.testing.assert_close(out[:, :2].std(0), torch.ones(2), atol=1e-3, rtol=0)
    assert float(norm.scale[2]) == pytest.approx(1e-3) and float(out[:, 2].abs().max()) == 0.0
    assert float(norm(torch.tensor([[5.0, 5.0, 5.0]])).max()) == 10.0  # far outside: clipped


def test_a_latent_run_reports_throughput_and_a_callback_can_stop_it(tmp_path):
    """As every learner: ``sps`` and ``cpu_s`` in each row, and the tuner's ``on_update`` (here: prune) is called."""
    from frugalrl.training import train

    seen = []

    def prune_after_two(learner, metrics):
        seen.append(metrics["sps"])
        return len(seen) < 2

    summary = train(breakout(), tmp_path / "run", on_update=prune_after_two)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(seen) == 2 and len(rows) == 2 and summary["real_env_steps"] < 512
    assert all(row["sps"] > 0 and row["cpu_s"] > 0 for row in rows)


def test_a_pruned_trial_stops_a_latent_run(tmp_path):
    """The tuner prunes from ``on_update`` (``frugalrl.tuning``: ``trial.should_prune()``, then
    ``raise optuna.TrialPruned``): a latent run stops at that update, as any run, with no summary."""
    import optuna

    from frugalrl.training import train

    class PruneAlways(optuna.pruners.BasePruner):
        def prune(self, study, trial) -> bool:
            return True

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    trial = optuna.create_study(direction="maximize", pruner=PruneAlways()).ask()

    def report(learner, metrics):  # as the tuner's, reporting every update
        trial.report(float(metrics.get("episode_return", 0.0)), step=learner.global_step)
        if trial.should_prune():
            raise optuna.TrialPruned(f"pruned at step {learner.global_step}")

    with pytest.raises(optuna.TrialPruned, match="pruned at step"):
        train(breakout(), tmp_path / "run", interactive=False, on_update=report)
    rows = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert len(rows) == 1 and json.loads(rows[0])["sps"] > 0
    assert not (tmp_path / "run" / "summary.json").exists()


def test_pipeline_gains_the_encoder_branch_only_with_latent(tmp_path):
    import yaml

    out = tmp_path / "latent.yaml"
    config = str(REPO / "configs/breakout-latent.yaml")
    cli_main(["pipeline", "compile", "-o", str(out), "--config", config, "--image", CPU_IMAGE])
    ir = next(yaml.safe_load_all(out.read_text()))  # the IR; the cluster's platform spec follows
    images = {e["container"]["image"] for e in ir["deploymentSpec"]["executors"].values()}
    assert images == {CPU_IMAGE}  # every step, the encoder branch's included
    tasks = ir["root"]["dag"]["tasks"]
    assert set(tasks) == {"collect-rollouts", "pretrain", "train", "evaluate-and-register"}
    assert tasks["train"]["dependentTasks"] == ["pretrain"] and tasks["train"]["taskInfo"]["name"].startswith("curric")
    assert tasks["pretrain"]["inputs"]["parameters"]["stage"]["runtimeValue"]["constant"] == "latent"
    encoder = ir["components"]["comp-train"]["inputDefinitions"]["artifacts"]["pretrained"]
    assert encoder["artifactType"]["schemaTitle"] == "system.Model"
    with pytest.raises(ConfigError, match="selection.kind"):
        validate_config({"rollout": {"kind": "latent"}, "selection": {"kind": "pivot"}})


@pytest.mark.slow
def test_local_latent_pipeline_steps_chain(tmp_path):
    """collect -> pretrain encoder -> curriculum train, as the components call them (no KFP)."""
    from frugalrl.ops.steps import collect_step, pretrain_step, train_step

    config = breakout()
    text = json.dumps({**config.to_dict(), "tracking": {"enabled": True, "experiment": "t", "log_model": True}})
    info = collect_step(text, [], str(tmp_path / "frames.npz"))
    assert info["kind"] == "frames" and len(info["sha256"]) == 64
    summary = pretrain_step(  # the probe is tested on its own; here it would be most of the time
        text, ["latent.pretrain_updates=2", "latent.probe=false"], str(tmp_path / "frames.npz"), str(tmp_path / "enc")
    )
    assert summary["dataset_sha256"] == info["sha256"]
    assert summary["registered_model"] == "breakout-encoder"
    run = train_step(text, [], str(tmp_path / "run"), pretrained=str(tmp_path / "enc"))  # latent.encoder_from
    assert "encoder and world model from" in run["encoder_note"] and run["model_uri"]


@pytest.mark.slow
def test_breakout_encoder_transfers_to_pong_with_a_new_world_model(frames, tmp_path):
    from frugalrl.latent.store import save_latent
    from frugalrl.training import train

    models, _ = train_latent_models(breakout(), frames, CostMeter())
    models.metadata = {"env_id": "ALE/Breakout-v5"}
    save_latent(tmp_path / "breakout.pt", models)
    pong = breakout(encoder_from=str(tmp_path / "breakout.pt"), encoder_mode="frozen")
    pong = validate_config({**pong.to_dict(), "env": {**pong.env.model_dump(), "id": "ALE/Pong-v5"}}, "test")
    summary = train(pong, tmp_path / "pong")
    assert "world model fitted on ALE/Pong-v5" in summary["encoder_note"]
    transferred = load_latent(tmp_path / "pong")
    assert transferred.world_model.num_actions == 6 and transferred.metadata["transferred_from"] == ["ALE/Breakout-v5"]
    for key, value in models.encoder.state_dict().items():  # frozen: the encoder is Breakout's
        torch.testing.assert_close(transferred.encoder.state_dict()[key], value)


@pytest.mark.slow
def test_lora_adapts_the_encoder_in_the_real_stage(tmp_path):
    from frugalrl.policy_store import load_policy_file
    from frugalrl.training import train

    summary = train(breakout(encoder_adapter="lora", lora_rank=2), tmp_path / "run")
    assert summary["lora_updates"] > 0 and 0 < summary["lora_trainable_parameters"] < 20_000
    assert summary["stage3_real_steps"] > 0 and summary["flops_per_sample"]["lora_backward"] > 0
    base = load_latent(tmp_path / "run").encoder.state_dict()
    policy, _ = load_policy_file(tmp_path / "run")
    adapted = policy.encoder.state_dict()
    assert not torch.equal(adapted["fc.weight"], base["fc.weight"])  # LoRA moved the merged weights
    with pytest.raises(ConfigError, match="final all-real stage"):
        breakout(encoder_adapter="lora", curriculum={"stages": [{"virtual_fraction": 0.5, "real_share": 1.0}]})


def test_frames_can_be_collected_by_a_saved_policy(tmp_path):
    from frugalrl.training import train

    pixel = validate_config(
        {"env": {"id": "ALE/Breakout-v5", "num_envs": 2}, "policy": {"kind": "cnn"},
         "ppo": {"total_timesteps": 64, "num_steps": 32, "batch_size": 32, "update_epochs": 1},
         "eval": {"episodes": 1, "deterministic": False}, "tracking": {"enabled": False}}, "test",
    )  # fmt: skip
    train(pixel, tmp_path / "pixel")
    data = collect_frames(breakout(behaviour=str(tmp_path / "pixel")), steps=64, seed=1)
    assert data.meta["behaviour"] == str(tmp_path / "pixel") and data.frames.shape[:2] == (2, 32)
    pong = validate_config({**breakout(behaviour=str(tmp_path / "pixel")).to_dict(), "env": {"id": "ALE/Pong-v5"}})
    with pytest.raises(Exception, match="plays ALE/Breakout-v5, not ALE/Pong-v5"):
        collect_frames(pong, steps=64)
