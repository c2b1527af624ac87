"""One encoder for several games: the dataset hash, per-game heads, shared cost, held-out games."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from frugalrl.cli import main as cli_main
from frugalrl.config import validate_config
from frugalrl.cost import CostMeter
from frugalrl.latent.dataset import FrameDataset
from frugalrl.latent.multigame import games_hash
from frugalrl.latent.pretrain import train_latent_models
from frugalrl.latent.store import load_latent, save_latent

from .test_latent import breakout


def fake_game(env_id: str, num_actions: int, seed: int, size: int = 84, steps: int = 48) -> FrameDataset:
    """Random frames with the layout of a collected dataset (no emulator: fast)."""
    rng = np.random.default_rng(seed)
    done = np.zeros((1, steps), dtype=bool)
    done[0, steps // 2] = True
    starts = np.zeros((1, steps), dtype=bool)
    starts[0, [0, steps // 2 + 1]] = True
    return FrameDataset(
        frames=rng.integers(0, 255, (1, steps, size, size), dtype=np.uint8),
        actions=rng.integers(0, num_actions, (1, steps)),
        rewards=rng.choice([0.0, 1.0], (1, steps)).astype(np.float32),
        terminated=done, truncated=np.zeros((1, steps), dtype=bool), starts=starts,
        ram=rng.integers(0, 255, (1, steps, 128), dtype=np.uint8),
        meta={"env_id": env_id, "stack": 4, "img_size": size, "num_actions": num_actions},
    )  # fmt: skip


def two_games() -> dict[str, FrameDataset]:
    return {"ALE/Breakout-v5": fake_game("ALE/Breakout-v5", 4, 1), "ALE/Boxing-v5": fake_game("ALE/Boxing-v5", 18, 2)}


def test_the_multi_game_hash_covers_every_frame_of_every_game():
    games = two_games()
    sha = games_hash(games)
    assert len(sha) == 64 and sha == games_hash(two_games())  # deterministic
    assert games_hash({"ALE/Breakout-v5": games["ALE/Breakout-v5"]}) == games["ALE/Breakout-v5"].content_hash()
    games["ALE/Boxing-v5"].frames[0, 3, 10, 10] ^= 1  # one pixel of the second game
    assert games_hash(games) != sha
    reordered = dict(reversed(list(two_games().items())))
    assert games_hash(reordered) != sha  # the order the games were given is part of the encoder's recipe
    renamed = {"ALE/Pong-v5" if k == "ALE/Boxing-v5" else k: v for k, v in two_games().items()}
    assert games_hash(renamed) != sha  # the same frames filed under another game


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """A shared encoder trained a few updates on two fake games, saved as a pretraining run saves it."""
    meter = CostMeter()
    models, metrics = train_latent_models(breakout(objective="dynamics", pretrain_updates=4), two_games(), meter)
    models.metadata = {"env_id": "ALE/Breakout-v5", "games": list(two_games()), "pretrain_flops": meter.total_flops}
    path = tmp_path_factory.mktemp("shared") / "encoder.pt"
    save_latent(path, models)
    return path, models, metrics


def test_every_game_gets_its_own_world_model_head(shared):
    path, models, metrics = shared
    assert set(models.heads) == {"ALE/Breakout-v5", "ALE/Boxing-v5"}
    assert models.heads["ALE/Breakout-v5"].num_actions == 4 and models.heads["ALE/Boxing-v5"].num_actions == 18
    assert set(metrics["per_game"]) == set(models.heads) and metrics["games"] == list(models.heads)
    assert metrics["psnr_db"] == pytest.approx(np.mean([m["psnr_db"] for m in metrics["per_game"].values()]), abs=1e-3)
    loaded = load_latent(path)
    assert loaded.games == ["ALE/Breakout-v5", "ALE/Boxing-v5"]
    assert loaded.for_game("ALE/Boxing-v5").world_model.num_actions == 18
    for key, value in models.heads["ALE/Boxing-v5"].state_dict().items():  # both heads trained and kept
        torch.testing.assert_close(loaded.heads["ALE/Boxing-v5"].state_dict()[key], value)
    assert not torch.equal(
        loaded.heads["ALE/Boxing-v5"].delta.weight, torch.zeros_like(models.heads["ALE/Boxing-v5"].delta.weight)
    )
    with pytest.raises(KeyError):
        loaded.for_game("ALE/Pong-v5")


def test_the_meter_keeps_a_shared_artifact_out_of_the_per_run_cost():
    meter = CostMeter()
    meter.add_pretrained("encoder models:/atari-encoder@champion", 5e12, shared=True)
    meter.add_pretrained("evaluator run/evaluator.pt", 1e9)
    summary = meter.summary()
    assert summary["shared_pretrain_flops"] == 5e12
    assert summary["total_flops"] == summary["pretrain_flops"] == 5e12 + 1e9
    assert summary["per_run_flops"] == 1e9


@pytest.mark.slow
def test_runs_on_the_shared_encoder_count_it_as_shared_and_transfer_to_an_unseen_game(shared, tmp_path):
    """Breakout (a game the encoder saw: its head, no refit) and Pong (never seen: a new world model)."""
    from frugalrl.training import train

    path, models, _ = shared
    seen = train(breakout(encoder_from=str(path)), tmp_path / "breakout")
    assert "(ALE/Breakout-v5's head)" in seen["encoder_note"]
    assert seen["shared_pretrain_flops"] == models.metadata["pretrain_flops"] > 0
    assert seen["per_run_flops"] == pytest.approx(seen["total_flops"] - seen["shared_pretrain_flops"])
    assert "world_model_pretrain" not in seen["flops_by_phase"]  # the head came with the encoder
    for key in ("wm_latent_error_k", "wm_latent_error_k_copy", "wm_reward_accuracy", "wm_imagined_return"):
        assert seen[key] is not None, key

    pong = breakout(encoder_from=str(path))
    pong = validate_config({**pong.to_dict(), "env": {**pong.env.model_dump(), "id": "ALE/Pong-v5"}}, "test")
    unseen = train(pong, tmp_path / "pong")
    assert "world model fitted on ALE/Pong-v5" in unseen["encoder_note"]
    assert unseen["flops_by_phase"]["world_model_pretrain"]["flops"] > 0  # fitted in the run: per-run cost
    assert unseen["shared_pretrain_flops"] == seen["shared_pretrain_flops"]
    transferred = load_latent(tmp_path / "pong")
    assert transferred.metadata["transferred_from"] == ["ALE/Breakout-v5", "ALE/Boxing-v5"]
    assert transferred.games == ["ALE/Pong-v5"] and transferred.world_model.num_actions == 6
    for key, value in models.encoder.state_dict().items():  # frozen: the shared encoder, unchanged
        torch.testing.assert_close(transferred.encoder.state_dict()[key], value)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--games", "ALE/NoSuchGame-v5"], "no such ALE game"),
        (["--games", "CartPole-v1", "ALE/Pong-v5"], "reads Atari screens"),
        (["--games", "ALE/Pong-v5", "ALE/Pong-v5"], "listed twice"),
        (["--games", "ALE/Breakout-v5", "ALE/Pong-v5", "--dataset", "d.npz"], "drop the dataset"),
    ],
)
def test_bad_games_are_one_line_errors(args, message, tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text(json.dumps(breakout().to_dict()))
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["pretrain", "encoder", "-c", str(config), "-o", str(tmp_path / "out"), *args])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "out" / "encoder.pt").exists()


def test_a_shared_encoder_is_probed_on_every_game_with_labels(shared, monkeypatch):
    """Breakout has probe labels, Boxing none: one probe, reported per game and as the mean."""
    from frugalrl.latent import pretrain

    asked = []

    def fake_probe(encoder, config, ceiling_lookup=None):
        asked.append(config.env.id)
        return {"ball_r2_mlp": 0.5, "paddle_r2_mlp": 0.95, "ball_ceiling_r2": 0.9}

    monkeypatch.setattr(pretrain, "probe_latent", fake_probe)
    _, models, _ = shared
    figures = pretrain.probe_games(models, breakout(), ["ALE/Breakout-v5", "ALE/Boxing-v5"])
    assert asked == ["ALE/Breakout-v5"]
    assert figures["breakout_ball_r2_mlp"] == 0.5 and figures["ball_r2_mlp"] == 0.5
    assert set(figures["probe"]) == {"ALE/Breakout-v5"}


@pytest.mark.slow
def test_pretrain_encoder_with_games_registers_atari_encoder_and_the_config_trains_on_it_by_uri(tmp_path, capsys):
    from .conftest import REPO

    shrink = ["latent.collect_steps=160", "latent.collect_envs=2", "latent.pretrain_updates=4", "threads=1",
              "latent.champion_min_psnr_db=0"]  # fmt: skip
    sets = [a for s in shrink for a in ("--set", s)]
    cli_main(["pretrain", "encoder", "-c", str(REPO / "configs/atari100k-encoder.yaml"), "-o", str(tmp_path / "enc"),
              "--games", "ALE/Breakout-v5", "ALE/Pong-v5", "--no-probe", *sets])  # fmt: skip
    assert "registered atari-encoder version 1 (champion)" in capsys.readouterr().out
    assert {p.name for p in (tmp_path / "enc").glob("dataset-*.npz")} == {"dataset-breakout.npz", "dataset-pong.npz"}
    made = json.loads((tmp_path / "enc" / "summary.json").read_text())
    assert made["games"] == ["ALE/Breakout-v5", "ALE/Pong-v5"] and set(made["per_game"]) == set(made["games"])

    run = ["threads=1", "total_real_steps=256", "env.num_envs=2", "ppo.num_steps=128", "latent.virtual_num_envs=4",
           "eval.episodes=1", "env.id=ALE/Breakout-v5", "tracking.log_model=false"]  # fmt: skip
    cli_main(["train", str(REPO / "configs/atari100k-latent.yaml"), "--out", str(tmp_path / "run"),
              *[a for s in run for a in ("--set", s)]])  # fmt: skip
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    # the alias resolves to the version the run used: its lineage names the exact encoder
    assert summary["pretrained_flops"] == {"encoder models:/atari-encoder/1": made["total_flops"]}
    assert summary["shared_pretrain_flops"] == made["total_flops"]
    assert "(ALE/Breakout-v5's head)" in summary["encoder_note"]
