"""The training entry point: config in, run directory and MLflow run out.

``train(config, out_dir)`` writes into ``out_dir``:

    config.yaml      the resolved config (what actually ran)
    checkpoint.pt    the latest checkpoint (atomic), for --resume
    metrics.jsonl    one line of metrics per update
    policy.pt        the exported policy (weights + observation normalisation)
    summary.json     the run contract (see docs/run-contract.md)

Run it as ``frugalrl train CONFIG --out DIR`` or ``python -m frugalrl.train CONFIG --out DIR``.
"""

from __future__ import annotations

import contextlib
import copy
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from frugalrl import __version__
from frugalrl.algos.gradient_sync import LOCAL_SYNC, GradientSync
from frugalrl.algos.ppo import PPO
from frugalrl.checkpoint import (
    CHECKPOINT_FILE,
    atomic_write_bytes,
    load_checkpoint,
    pack_bytes,
    save_checkpoint,
    unpack_bytes,
)
from frugalrl.config import ExperimentConfig
from frugalrl.cost import CostMeter
from frugalrl.envs.factory import make_vec_env
from frugalrl.envs.wrappers import (
    NormalizeObservation,
    env_state_dict,
    find_wrapper,
    load_env_state_dict,
    wrapper_chain,
)
from frugalrl.errors import CheckpointError, FrugalError, TrainingDiverged
from frugalrl.evaluation import evaluate_policy
from frugalrl.fusion.launch import under_torchrun
from frugalrl.nets.policy import ExportedPolicy
from frugalrl.policy_store import save_policy
from frugalrl.progress import TrainingProgress
from frugalrl.selection import AllSamples, FewerEpochs, RandomSkip, SampleSelector

CHECKPOINT_FORMAT = "frugalrl-checkpoint-1"
TRACE_PLOT = "control_trace.png"  # off-policy runs: hyperparameters, exploration and replay over time
# The run contract (shared/design.md): keys every summary.json carries, whatever else it adds.
SUMMARY_KEYS = (
    "env_id", "algo", "seed", "techniques", "real_env_steps", "virtual_env_steps", "forward_samples",
    "backward_samples", "train_flops", "wall_s", "env_s", "learn_s", "peak_rss_mb", "eval_mean",
    "eval_std", "eval_iqm", "eval_episodes", "mlflow_run_id",
)  # fmt: skip
Learner = Any  # PPO, DQN or SAC: start(seed), run_update(), state_dict(), policy, env, global_step, update


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise FrugalError("device = cuda but no CUDA device is visible; set device: cpu or auto")
    return torch.device(name)


def _base_env(env: Any) -> Any:
    return wrapper_chain(env)[-1]


def build_selector(config: ExperimentConfig, agent: PPO, meter: CostMeter, device: torch.device) -> SampleSelector:
    """The ``SampleSelector`` the config asks for: all samples, PivotRL importance, or a control."""
    selection = config.selection
    if selection.kind == "random":
        return RandomSkip(selection.keep_fraction, selection.packing, device)
    if selection.kind == "epochs":
        return FewerEpochs(selection.keep_fraction, device)
    if selection.kind == "pivot":
        from frugalrl.pivot import ImportanceSelector, initial_evaluator

        evaluator, note = initial_evaluator(config.pivot, agent.env.single_observation_space)
        print(f"pivot: {note}")
        return ImportanceSelector(config.pivot, evaluator, agent.policy, meter, device, selection.packing)
    return AllSamples(device)


def build_learner(
    config: ExperimentConfig,
    env: Any,
    meter: CostMeter,
    device: torch.device,
    gradient_sync: GradientSync = LOCAL_SYNC,
) -> Learner:
    """The learner ``config.algo`` names, with its technique objects plugged in."""
    if config.algo == "dqn":
        from frugalrl.algos.dqn import DQN

        return DQN(config, env, meter, device, gradient_sync=gradient_sync)
    if config.algo == "sac":
        from frugalrl.algos.sac import SAC

        return SAC(config, env, meter, device, gradient_sync=gradient_sync)
    agent = PPO(config, env, meter, device, gradient_sync=gradient_sync)
    agent.selector = build_selector(config, agent, meter, device)
    return agent


def export_policy(agent: Learner, config: ExperimentConfig) -> ExportedPolicy:
    """A self-contained copy of the agent's policy, with the observation statistics baked in."""
    normalizer = find_wrapper(agent.env, NormalizeObservation)
    mean = var = None
    if normalizer is not None:
        mean = torch.as_tensor(normalizer.rms.mean, dtype=torch.float64)
        var = torch.as_tensor(normalizer.rms.var, dtype=torch.float64)
    return ExportedPolicy(
        copy.deepcopy(agent.policy).cpu().eval(),
        spec={"env": config.env.model_dump(mode="json"), "policy": config.policy.model_dump(mode="json")},
        obs_mean=mean,
        obs_var=var,
        clip_obs=config.env.clip_obs,
    )


def _checkpoint_state(agent: Learner, meter: CostMeter, config: ExperimentConfig, run_id: str | None) -> dict[str, Any]:
    base = _base_env(agent.env)
    snapshot = base.snapshot() if hasattr(base, "snapshot") else None
    return {
        "format": CHECKPOINT_FORMAT,
        "frugalrl_version": __version__,
        "config_hash": config.hash(),
        "agent": agent.state_dict(),
        "meter": meter.state_dict(),
        "env_wrappers": env_state_dict(agent.env),
        "env_snapshot": pack_bytes(snapshot),
        "torch_rng": torch.get_rng_state(),
        "mlflow_run_id": run_id,
    }


def _restore(state: dict[str, Any], agent: Learner, meter: CostMeter, config: ExperimentConfig) -> None:
    if state.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"checkpoint format {state.get('format')!r} is not {CHECKPOINT_FORMAT!r}")
    if state["config_hash"] != config.hash():
        raise CheckpointError(
            "checkpoint was written by a different config (hash "
            f"{state['config_hash']} != {config.hash()}); resume with the run's own config.yaml"
        )
    agent.load_state_dict(state["agent"])
    meter.load_state_dict(state["meter"])
    snapshot = unpack_bytes(state.get("env_snapshot"))
    base = _base_env(agent.env)
    if snapshot is not None and hasattr(base, "restore"):
        base.restore(snapshot)
    else:
        # No physics snapshot (e.g. ALE, Box2D): start fresh episodes, seeded by position.
        print("note: this env cannot be snapshotted; resumed episodes restart, so the run is not bit-identical")
        agent.start(config.seed + agent.update)
    load_env_state_dict(agent.env, state["env_wrappers"])
    torch.set_rng_state(state["torch_rng"])


def start_run_dir(config: ExperimentConfig, out: Path) -> torch.device:
    """Create the run directory with the resolved config.yaml, set threads and seeds; the device to use."""
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / "config.yaml", config.to_yaml().encode())
    if config.threads > 0:
        torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    np.random.seed(config.seed)
    return resolve_device(config.device)


def write_json(path: Path, data: dict[str, Any]) -> None:
    atomic_write_bytes(path, (json.dumps(data, indent=2, sort_keys=False) + "\n").encode())


def train(
    config: ExperimentConfig,
    out_dir: str | Path,
    *,
    resume: bool = False,
    interactive: bool | None = None,
    on_update: Callable[[Learner, dict[str, float]], None] | None = None,
) -> dict[str, Any]:
    """Train a policy as ``config`` says; write the run directory; return the summary.

    ``resume=True`` continues from ``out_dir/checkpoint.pt``; ``interactive`` forces the rich
    progress bar on or off (default: on when stdout is a terminal). ``on_update(agent, metrics)``
    runs after every update (the tuner reports intermediate values and prunes from there).
    """
    if config.latent.enabled:  # the latent curriculum has its own loop (two rollout sources)
        if resume:
            raise FrugalError("latent-curriculum runs cannot be resumed yet; start a new run with --out")
        from frugalrl.latent.train import train_latent

        return train_latent(config, out_dir, interactive)
    out = Path(out_dir)
    sync = None
    if under_torchrun():  # one of N workers: gradients are fused; rank 0 alone reports and checkpoints
        from frugalrl.fusion.launch import init_distributed

        sync = init_distributed(config)
        if resume:
            raise FrugalError("multi-worker runs cannot be resumed yet; start a new run with --out")
        if sync.rank > 0:
            out = out / f"rank{sync.rank}"
            config = config.model_copy(update={"tracking": config.tracking.model_copy(update={"enabled": False})})
    ckpt_path = out / CHECKPOINT_FILE
    state = None
    if resume:
        state = load_checkpoint(ckpt_path)
    elif ckpt_path.exists():
        raise FrugalError(
            f"{out} already holds a run (checkpoint.pt); continue it with --resume {out} or pick a new --out"
        )
    device = start_run_dir(config, out)

    env = make_vec_env(config.env, gamma=config.algo_config.gamma)
    meter = CostMeter()
    # the same initial weights on every worker; workers fuse their gradients through ``sync``
    agent = build_learner(config, env, meter, device, sync or LOCAL_SYNC)
    rank = sync.rank if sync else 0
    if sync:
        torch.manual_seed(config.seed + 1000 * rank)  # each worker samples its own actions and minibatches
        if hasattr(agent, "rng"):
            agent.rng = np.random.default_rng(config.seed + 1000 * rank)
    if state is not None:
        _restore(state, agent, meter, config)
    else:
        agent.start(config.seed + 1000 * rank)  # and plays its own episodes

    tracker_cm: Any = contextlib.nullcontext(None)
    if config.tracking.enabled:
        from frugalrl.tracking import RunTracker

        tracker_cm = RunTracker(config, run_id=state.get("mlflow_run_id") if state else None)

    metrics_log = (out / "metrics.jsonl").open("a")
    try:
        with tracker_cm as tracker:
            run_id = tracker.run_id if tracker else None
            with TrainingProgress(
                agent.num_updates * agent.rollout_size, agent.global_step, config.log_every_updates, interactive
            ) as progress:
                while agent.update < agent.num_updates:
                    try:
                        metrics = agent.run_update()
                    except TrainingDiverged as exc:
                        kept = (
                            f"last good checkpoint kept at {ckpt_path}"
                            if ckpt_path.exists()
                            else "no checkpoint was written yet"
                        )
                        raise TrainingDiverged(f"{exc}; {kept}") from None
                    metrics.update(sps=agent.global_step / max(meter.wall_s, 1e-9))
                    metrics_log.write(json.dumps({"update": agent.update, "step": agent.global_step, **metrics}) + "\n")
                    metrics_log.flush()
                    if tracker:
                        tracker.log_metrics(metrics, step=agent.global_step)
                    progress.update(agent.global_step, metrics)
                    if on_update is not None:
                        on_update(agent, metrics)
                    last = agent.update == agent.num_updates
                    if (agent.update % config.checkpoint.every_updates == 0 or last) and rank == 0:
                        save_checkpoint(ckpt_path, _checkpoint_state(agent, meter, config, run_id))
            if sync is None:
                return finish_run(config, out, agent, meter, tracker, device)
            if rank > 0:
                return {"rank": rank, **sync.summary()}
            techniques = [*learner_techniques(agent), "gradient_fusion"]
            extra = {**sync.summary(), "real_env_steps_all_workers": meter.real_env_steps * sync.world_size}
            return finish_run(config, out, agent, meter, tracker, device, techniques=techniques, extra=extra)
    finally:
        metrics_log.close()
        env.close()
        if sync is not None:
            from frugalrl.fusion.launch import close_distributed

            close_distributed()


def learner_techniques(agent: Learner) -> list[str]:
    """The techniques a learner runs with (off-policy RMT parts, or PPO's sample selector)."""
    if hasattr(agent, "techniques"):
        return list(agent.techniques)
    return [agent.selector.technique] if agent.selector.technique else []


def finish_run(
    config: ExperimentConfig,
    out: Path,
    agent: Learner,
    meter: CostMeter,
    tracker: Any,
    device: torch.device,
    *,
    policy: ExportedPolicy | None = None,
    techniques: list[str] | None = None,
    extra: dict[str, Any] | None = None,
    example: np.ndarray | None = None,
) -> dict[str, Any]:
    """Export, evaluate, write summary.json, log everything to MLflow.

    Other trainers (the latent curriculum) pass their own exported ``policy``, ``techniques``,
    ``extra`` summary keys and an input ``example`` for the MLflow model signature.
    """
    policy = policy or export_policy(agent, config)
    if hasattr(agent, "summary_extra"):  # the learner's own keys: replay statistics, PPO's step kind
        extra = {**agent.summary_extra(), **(extra or {})}
    if config.algo != "ppo":  # off-policy learners: the meta-controller's trace
        from frugalrl.meta.plot import plot_training_trace

        plot_training_trace(out / "metrics.jsonl", out / TRACE_PLOT)
    if techniques is None:
        techniques = learner_techniques(agent)
    save_policy(out / "policy.pt", policy, config)
    started = time.perf_counter()
    result = evaluate_policy(policy, config.env, config.eval.episodes, config.eval.seed, config.eval.deterministic)
    eval_s = time.perf_counter() - started

    from frugalrl.tracking import git_commit

    summary: dict[str, Any] = {
        "env_id": config.env.id,
        "algo": config.algo,
        "seed": config.seed,
        "techniques": techniques,
        **meter.summary(),
        **result.metrics(),
        "eval_s": round(eval_s, 3),
        "eval_returns": result.returns,
        "updates": agent.update,
        "flops_per_sample": meter.flops_per_sample,
        "config_hash": config.hash(),
        "git_commit": git_commit(),
        "frugalrl_version": __version__,
        "device": str(device),
        "mlflow_run_id": tracker.run_id if tracker else None,
        "model_uri": None,
        **(extra or {}),
    }
    missing = set(SUMMARY_KEYS) - set(summary)
    assert not missing, f"summary.json lacks run-contract keys {sorted(missing)}"
    if tracker:
        if config.tracking.log_model:
            example = agent.next_obs[:1].cpu().numpy() if example is None else example
            summary["model_uri"] = tracker.log_policy(policy, example)
        numeric = {k: v for k, v in summary.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        tracker.log_metrics(numeric, step=agent.global_step)
        write_json(out / "summary.json", summary)
        for name in ("summary.json", "config.yaml", "metrics.jsonl", "policy.pt", CHECKPOINT_FILE, TRACE_PLOT):
            if (out / name).exists():
                tracker.log_artifact(out / name, artifact_path="run")
    else:
        write_json(out / "summary.json", summary)
    return summary


def main(argv: list[str] | None = None) -> None:
    """``python -m frugalrl.train CONFIG [--out DIR]``: the same as ``frugalrl train``."""
    from frugalrl.cli import main as cli_main

    cli_main(["train", *(argv if argv is not None else __import__("sys").argv[1:])])


if __name__ == "__main__":
    main()
