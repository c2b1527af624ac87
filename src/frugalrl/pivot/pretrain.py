"""Evaluator pretraining: label baseline-PPO rollouts, fit the evaluator, measure its ranking.

Two steps, so a pipeline can run them as two components:

1. ``collect_dataset``: train baseline PPO (all samples) for ``selection.settings.evaluator.pretrain_steps``
   env steps and record every rollout's observations with their importance labels (computed
   with the policy of that moment), ranked within their rollout; saved as ``dataset.npz`` with
   its sha256.
2. ``pretrain_from_dataset``: fit the evaluator on a random 80% for ``pretrain_epochs`` epochs
   and report the Spearman correlation between its scores and the held-out 20%'s labels.

``pretrain_evaluator`` does both and logs the evaluator to MLflow as ``<task>-evaluator``.
"""

from __future__ import annotations

import hashlib
import io
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from frugalrl.algos.ppo import PPO
from frugalrl.checkpoint import atomic_write_bytes
from frugalrl.config import ExperimentConfig
from frugalrl.cost import CostMeter
from frugalrl.envs.factory import make_vec_env
from frugalrl.errors import CheckpointError, ConfigError
from frugalrl.pivot.evaluator import ImportanceEvaluator, build_evaluator, save_evaluator
from frugalrl.pivot.labels import compute_labels, rank_normalize, spearman
from frugalrl.pivot.scheduler import fit_evaluator
from frugalrl.run_setup import RunSetup
from frugalrl.selection import AllSamples, RolloutBatch
from frugalrl.tracking.registry import log_and_register

LABEL_KINDS = ("policy_gradient", "advantage", "grad_norm")


class _LabelRecorder(AllSamples):
    """Plain PPO's selector that also records each rollout with its labels."""

    def __init__(self, policy: Any, kinds: tuple[str, ...]):
        self.policy = policy
        self.kinds = kinds
        self.obs: list[torch.Tensor] = []
        self.labels: dict[str, list[torch.Tensor]] = {kind: [] for kind in kinds}

    def on_rollout(self, batch: RolloutBatch, step: int) -> None:
        self.obs.append(batch.obs.clone().cpu())
        for kind in self.kinds:
            raw = compute_labels(kind, self.policy, batch.obs, batch.actions, batch.advantages, batch.dist_params)
            self.labels[kind].append(rank_normalize(raw.detach()).cpu())


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class _CollectingPPO(PPO):
    """Baseline PPO whose budget is ``selection.settings.evaluator.pretrain_steps`` env steps (not
    ``ppo.total_timesteps``, which keeps setting its learning-rate schedule)."""

    def __init__(self, config: ExperimentConfig, env: Any, meter: CostMeter, device: torch.device, steps: int):
        super().__init__(config, env, meter, device)
        self.steps = steps

    def finished(self) -> bool:
        return self.global_step >= self.steps


def collect_dataset(
    config: ExperimentConfig, path: Path, kinds: tuple[str, ...] | None = None, run_dir: Path | None = None
) -> dict[str, Any]:
    """Run baseline PPO and save labelled observations to ``path`` (npz). Returns its description.

    The PPO run goes through the run loop; with ``run_dir`` its metrics.jsonl (one row per update) is kept there.
    """
    kinds = kinds or tuple(dict.fromkeys(("policy_gradient", "advantage", config.pivot.label)))
    torch.manual_seed(config.seed)
    if config.threads > 0:
        torch.set_num_threads(config.threads)
    env = make_vec_env(config.env, gamma=config.ppo.gamma)
    meter = CostMeter()
    device = torch.device("cpu")
    agent = _CollectingPPO(config, env, meter, device, config.pivot.evaluator.pretrain_steps)
    recorder = _LabelRecorder(agent.policy, kinds)
    agent.selector = recorder
    setup = RunSetup.around(config, agent, meter, device, run_dir)
    with setup.tracked():
        agent.start(config.seed)
        setup.run()
    arrays = {"obs": torch.cat(recorder.obs).numpy()}
    arrays.update({f"label_{kind}": torch.cat(values).numpy() for kind, values in recorder.labels.items()})
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    path = Path(path)
    atomic_write_bytes(path, buffer.getvalue())
    return {
        "path": str(path),
        "sha256": sha256_file(path),
        "samples": int(arrays["obs"].shape[0]),
        "labels": list(kinds),
        "env_id": config.env.id,
        **meter.summary(),
    }


def collect_labelled(config: ExperimentConfig, path: Path) -> dict[str, Any]:
    """``collect_dataset`` as the pretraining stage's collection (``frugalrl.pretraining.pivot``) calls it."""
    return {**collect_dataset(config, path), "kind": "labelled_rollouts"}


def load_dataset(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path) as data:
            return {key: data[key] for key in data.files}
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"dataset {path} is missing or corrupt ({exc}); collect it again") from None


def pretrain_from_dataset(
    config: ExperimentConfig, dataset_path: Path, evaluator: ImportanceEvaluator | None = None
) -> tuple[ImportanceEvaluator, dict[str, Any]]:
    """Fit an evaluator on a labelled dataset; returns it and its metrics (Spearman on held-out data)."""
    data = load_dataset(dataset_path)
    kind = config.pivot.label
    if f"label_{kind}" not in data:
        raise CheckpointError(
            f"dataset {dataset_path} has no {kind!r} labels; collect it with selection.settings.label = {kind}"
        )
    obs = torch.as_tensor(data["obs"])
    targets = torch.as_tensor(data[f"label_{kind}"], dtype=torch.float32)
    ev = config.pivot.evaluator
    generator = torch.Generator().manual_seed(config.seed)
    order = torch.randperm(len(obs), generator=generator)
    n_test = max(1, int(len(obs) * ev.holdout_fraction))
    test, train = order[:n_test], order[n_test:]
    # Seeded before the evaluator is built: its initial weights are part of the result (torch seeds
    # a fresh process at random, so a pretraining step in a new process started from other weights).
    torch.manual_seed(config.seed)
    if evaluator is None:
        from gymnasium.spaces import Box

        space = Box(-np.inf, np.inf, tuple(obs.shape[1:]), dtype=data["obs"].dtype)
        evaluator = build_evaluator(space, ev.hidden)
    optimizer = torch.optim.Adam(evaluator.parameters(), lr=ev.learning_rate)
    meter = CostMeter()
    started = time.perf_counter()
    with torch.no_grad():
        before = spearman(evaluator(obs[test]), targets[test])
    loss = fit_evaluator(evaluator, optimizer, obs[train], targets[train], ev.pretrain_epochs, ev.batch_size, meter)
    with torch.no_grad():
        scores = evaluator(obs[test])
        after = spearman(scores, targets[test])
        others = {
            f"spearman_vs_{other}": spearman(scores, torch.as_tensor(data[f"label_{other}"])[test])
            for other in LABEL_KINDS
            if other != kind and f"label_{other}" in data
        }
    metrics = {
        "label": kind,
        "train_samples": len(train),
        "test_samples": len(test),
        "epochs": ev.pretrain_epochs,
        "final_loss": loss,
        "spearman_before": before,
        "spearman": after,
        **others,
        "fit_s": round(time.perf_counter() - started, 3),
        "fit_flops": meter.aux_flops,
    }
    return evaluator, metrics


def pretrain_evaluator(config: ExperimentConfig, out_dir: Path, dataset: Path | None = None) -> dict[str, Any]:
    """Collect (unless ``dataset`` is given), fit, save ``evaluator.pt``, log and register in MLflow."""
    if config.selection.kind != "pivot":
        # every setting would be a default nobody chose, and the result would still be registered and promoted
        raise ConfigError(
            "the config has no pivot section (selection.kind: pivot and its settings), so nothing says which "
            "evaluator to pretrain; add one (see configs/cartpole-pivot.yaml)"
        )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    collected: dict[str, Any] = {}
    if dataset is None:
        dataset = out / "dataset.npz"
        collected = collect_dataset(config, dataset, run_dir=out)
    evaluator, metrics = pretrain_from_dataset(config, dataset)
    metrics["dataset_sha256"] = sha256_file(dataset)
    # Collecting the labelled data (a PPO run) and fitting: what a run that loads this evaluator starts from.
    metrics["pretrain_flops"] = collected.get("total_flops", 0.0) + metrics["fit_flops"]
    meta = {"env_id": config.env.id, "label": config.pivot.label, "pretrain_flops": metrics["pretrain_flops"]}
    if not collected:
        meta["pretrain_flops_note"] = "fit only: the dataset was collected elsewhere"
    save_evaluator(out / "evaluator.pt", evaluator, meta)
    atomic_write_bytes(out / "metrics.json", (json.dumps(metrics, indent=2) + "\n").encode())
    summary: dict[str, Any] = {
        "env_id": config.env.id,
        "algo": "ppo",
        "seed": config.seed,
        "techniques": ["pivot_pretrain"],
        **{k: v for k, v in collected.items() if k not in ("path", "labels", "env_id", "sha256")},
        **{f"evaluator_{k}" if k in ("epochs", "label") else k: v for k, v in metrics.items()},
        "total_flops": metrics["pretrain_flops"],  # everything here is pretraining for the runs that load it
        "wall_s": round(time.perf_counter() - started, 3),
        "evaluator_parameters": sum(p.numel() for p in evaluator.parameters()),
        "mlflow_run_id": None,
        "model_uri": None,
    }
    if config.tracking.enabled:
        summary.update(_log_evaluator(config, out, evaluator, summary))
    atomic_write_bytes(out / "summary.json", (json.dumps(summary, indent=2) + "\n").encode())
    return summary


def _log_evaluator(config: ExperimentConfig, out: Path, evaluator: ImportanceEvaluator, summary: dict) -> dict:
    """MLflow run with the metrics and files; registers ``<task>-evaluator`` (score: held-out Spearman)."""
    files = [out / "metrics.json", out / "evaluator.pt"]
    run_name = f"{config.name}-evaluator"
    example = np.zeros((1, *evaluator.obs_shape), dtype=np.uint8 if evaluator.pixels else np.float32)
    floors = {"spearman": (summary["spearman"], config.pivot.evaluator.champion_min_spearman)}
    return log_and_register(
        config, run_name, summary, files, evaluator, "evaluator", "spearman", "heldout_spearman", example, None, floors
    )
