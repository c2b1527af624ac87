"""The training entry point: config in, run directory and MLflow run out.

``train(config, out_dir)`` writes into ``out_dir``:

    config.yaml      the resolved config (what actually ran)
    checkpoint.pt    the latest checkpoint (atomic), for --resume
    metrics.jsonl    one line of metrics per update
    policy.pt        the exported policy (weights + observation normalisation)
    summary.json     the run contract (see docs/run-contract.md)

Run it as ``frugalrl train CONFIG --out DIR`` or ``python -m frugalrl train CONFIG --out DIR``. The run
directory helpers (``start_run_dir``, ``finish_run``) live in ``frugalrl.rundir``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from frugalrl import __version__
from frugalrl.algos.base import Learner, Snapshottable
from frugalrl.algos.gradient_sync import LOCAL_SYNC, GradientSync
from frugalrl.algos.ppo import PPO
from frugalrl.checkpoint import (
    CHECKPOINT_FILE,
    load_checkpoint,
    pack_bytes,
    unpack_bytes,
)
from frugalrl.config import ExperimentConfig
from frugalrl.cost import CostMeter
from frugalrl.envs.factory import check_env, make_vec_env
from frugalrl.envs.wrappers import (
    env_state_dict,
    load_env_state_dict,
    wrapper_chain,
)
from frugalrl.errors import CheckpointError, FrugalError, Interrupted, TrainingDiverged
from frugalrl.evaluation import protocol_note
from frugalrl.fusion.launch import under_torchrun
from frugalrl.loop import (
    Callback,
    Checkpointer,
    CpuBudget,
    MetricsLog,
    OnUpdate,
    Progress,
    Throughput,
    Tracking,
    run_loop,
)
from frugalrl.progress import TrainingProgress
from frugalrl.rundir import (
    check_new_run_dir,
    finish_run,
    metrics_log_lines,
    preflight,
    start_run_dir,
    truncate_metrics_log,
)
from frugalrl.selection import SampleSelector
from frugalrl.selectors import SELECTORS, SelectorContext

CHECKPOINT_FORMAT = "frugalrl-checkpoint-1"


def _base_env(env: Any) -> Any:
    return wrapper_chain(env)[-1]


def build_selector(config: ExperimentConfig, agent: PPO, meter: CostMeter, device: torch.device) -> SampleSelector:
    """The ``SampleSelector`` registered under ``selection.kind`` (``frugalrl.selectors``)."""
    settings = SELECTORS.settings_for(config.selection.kind, config.selection.settings)
    context = SelectorContext(config, settings, agent.policy, agent.env.single_observation_space, meter, device)
    return SELECTORS.entry(config.selection.kind).factory(context)


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


def _interrupted(agent: Learner, saved: int | None, ckpt_path: Path, out: Path) -> str:
    """The Ctrl-C line: what is kept and how to go on."""
    if not agent.resumable:
        return f"interrupted at update {agent.update}; this kind of run cannot be resumed: start it again"
    if saved is None and not ckpt_path.exists():
        return f"interrupted at update {agent.update} before the first checkpoint; start again with a new --out"
    kept = f"update {saved}" if saved is not None else "an earlier update"
    return (f"interrupted at update {agent.update}; the checkpoint of {kept} is kept at {ckpt_path}; "
            f"continue with: frugalrl train --resume {out}")  # fmt: skip


def _checkpoint_state(
    agent: Learner, meter: CostMeter, config: ExperimentConfig, run_id: str | None, out: Path
) -> dict[str, Any]:
    base = _base_env(agent.env)
    snapshot = base.snapshot() if isinstance(base, Snapshottable) else None
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
        "run_dir": str(Path(out).resolve()),  # a copied directory resumes into an MLflow run of its own
    }


def _check_resumable(state: dict[str, Any], config: ExperimentConfig, out: Path) -> None:
    """A resume that cannot continue this run is refused before anything in it is rewritten."""
    if state.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"checkpoint format {state.get('format')!r} is not {CHECKPOINT_FORMAT!r}")
    if state["config_hash"] != config.hash():
        raise CheckpointError(
            "checkpoint was written by a different config (hash "
            f"{state['config_hash']} != {config.hash()}); resume with the run's own config.yaml"
        )
    if (out / "summary.json").exists():
        raise FrugalError(
            f"{out} is a finished run (it has summary.json): nothing to resume; start a new run with --out"
        )


def _restore(state: dict[str, Any], agent: Learner, meter: CostMeter, config: ExperimentConfig) -> None:
    agent.load_state_dict(state["agent"])
    meter.load_state_dict(state["meter"])
    snapshot = unpack_bytes(state.get("env_snapshot"))
    base = _base_env(agent.env)
    if snapshot is not None and isinstance(base, Snapshottable):
        base.restore(snapshot)
    else:
        # No physics snapshot (e.g. ALE, Box2D): start fresh episodes, seeded by position.
        print("note: this env cannot be snapshotted; resumed episodes restart, so the run is not bit-identical")
        agent.start(config.seed + agent.update)
    load_env_state_dict(agent.env, state["env_wrappers"])
    torch.set_rng_state(state["torch_rng"])


def train(
    config: ExperimentConfig,
    out_dir: str | Path,
    *,
    resume: bool = False,
    interactive: bool | None = None,
    on_update: Callable[[Learner, dict[str, float]], None] | None = None,
    callbacks: Sequence[Callback] = (),
    pipeline_run_id: str | None = None,
) -> dict[str, Any]:
    """Train a policy as ``config`` says; write the run directory; return the summary.

    ``resume=True`` continues from ``out_dir/checkpoint.pt``; ``interactive`` forces the rich
    progress bar on or off (default: on when stdout is a terminal). ``on_update(agent, metrics)``
    runs after every update (the tuner reports intermediate values and prunes from there);
    ``callbacks`` are further run-loop hooks (``frugalrl.loop.Callback``), called before the checkpoint.
    ``pipeline_run_id`` tags the MLflow run with the pipeline run it belongs to.
    """
    out = Path(out_dir)
    sync = None
    state = None
    ckpt_path = out / CHECKPOINT_FILE
    first_rank = not (under_torchrun() and int(os.environ.get("RANK", "0")) > 0)  # rank 0 owns the shared --out
    if not resume and first_rank:
        check_new_run_dir(out)
    made_here = first_rank and not resume and not out.exists()  # removed again if the run never gets going
    if not resume:
        from frugalrl.tracking.provenance import pin_pretrained

        config, pinned = pin_pretrained(config)  # registry aliases move: the run names the version it used
        for line in pinned:
            print(line)
    check_env(config)  # an env or algorithm the run cannot use fails here, before anything is written
    if first_rank and not resume and (note := protocol_note(config.env, config.eval.episodes)):
        print(note)
    # a set-up that fails leaves no half-made run directory behind
    with preflight(out) if first_rank else contextlib.nullcontext():
        if config.latent.enabled:  # two rollout sources behind one learner; no checkpoints yet
            if resume:
                raise FrugalError("latent-curriculum runs cannot be resumed yet; start a new run with --out")
            from frugalrl.latent.train import start_latent_run

            meter = CostMeter()
            agent, device = start_latent_run(config, out, meter)
            env = agent.env
            rank = 0
        else:
            if under_torchrun():  # one of N workers: gradients are fused; rank 0 alone reports and checkpoints
                from frugalrl.fusion.launch import init_distributed

                sync = init_distributed(config)
                if resume:
                    raise FrugalError("multi-worker runs cannot be resumed yet; start a new run with --out")
                if sync.rank > 0:
                    out = out / f"rank{sync.rank}"
                    tracking = config.tracking.model_copy(update={"enabled": False})
                    config = config.model_copy(update={"tracking": tracking})
            ckpt_path = out / CHECKPOINT_FILE
            if resume:
                state = load_checkpoint(ckpt_path)
                _check_resumable(state, config, out)  # refused before config.yaml or the checkpoint is rewritten
                metrics_log_lines(out)  # a corrupt log is refused before anything is rewritten
            device = start_run_dir(config, out)

            env = make_vec_env(config.env, gamma=config.algo_config.gamma)
            meter = CostMeter()
            # the same initial weights on every worker; workers fuse their gradients through ``sync``
            agent = build_learner(config, env, meter, device, sync or LOCAL_SYNC)
            rank = sync.rank if sync else 0
            if sync:
                torch.manual_seed(config.seed + 1000 * rank)  # each worker samples its own actions and minibatches
                agent.seed_sampling(config.seed + 1000 * rank)
            if state is not None:
                _restore(state, agent, meter, config)
                dropped = truncate_metrics_log(out, agent.update)
                redo = f"; {dropped} later lines of metrics.jsonl are redone" if dropped else ""
                print(f"resuming {out} from update {agent.update} (step {agent.global_step:,}){redo}")
            else:
                agent.start(config.seed + 1000 * rank)  # and plays its own episodes

    tracker_cm: Any = contextlib.nullcontext(None)
    if config.tracking.enabled:
        from frugalrl.tracking import RunTracker

        resume_id = state.get("mlflow_run_id") if state else None
        tags = {}
        if state and state.get("run_dir") not in (None, str(out.resolve())):  # a copy (or a move) of the run
            tags = {"frugalrl.copied_from_run_id": str(resume_id), "frugalrl.copied_from_dir": state["run_dir"]}
            print(f"{out} is a copy of {state['run_dir']}: it gets its own MLflow run (copied from {resume_id})")
            resume_id = None
        if resume_id is not None and not tags:  # what the last attempt could not send goes first
            from frugalrl.tracking.offline import pending, sync_run_dir

            if pending(out):
                print(sync_run_dir(out))
        try:
            tracker_cm = RunTracker(
                config, run_id=resume_id, pipeline_run_id=pipeline_run_id, tags=tags, buffer_dir=out
            )
        except BaseException:  # an unreachable server: leave nothing, so the same command can simply be retried
            if made_here:
                env.close()
                shutil.rmtree(out, ignore_errors=True)
            raise

    metrics_log = (out / "metrics.jsonl").open("a")
    try:
        with tracker_cm as tracker:
            run_id = tracker.run_id if tracker else None
            checkpointer = None
            if agent.resumable and rank == 0:

                def checkpoint_state(learner: Learner) -> dict[str, Any]:
                    if tracker is not None:  # MLflow holds every step up to the checkpoint: a resume redoes the rest
                        tracker.flush()
                    return _checkpoint_state(learner, meter, config, run_id, out)

                checkpointer = Checkpointer(ckpt_path, checkpoint_state, config.checkpoint.every_updates)
            with TrainingProgress(agent.total_steps, agent.global_step, config.log_every_updates, interactive) as bar:
                budget = CpuBudget(config.cpu_budget_s) if config.cpu_budget_s else None
                hooks: list[Callback] = [Throughput(meter), MetricsLog(metrics_log)]
                hooks += [Tracking(tracker)] if tracker else []
                hooks += [Progress(bar)]
                hooks += [OnUpdate(on_update)] if on_update is not None else []
                hooks += [*callbacks, *([budget] if budget else []), *([checkpointer] if checkpointer else [])]
                try:
                    run_loop(agent, hooks)
                except KeyboardInterrupt:
                    saved = checkpointer.saved_at if checkpointer is not None else None
                    raise Interrupted(_interrupted(agent, saved, ckpt_path, out)) from None
                except TrainingDiverged as exc:
                    if not agent.resumable:  # nothing to resume from: the error as the learner raised it
                        raise
                    kept = (
                        f"last good checkpoint kept at {ckpt_path}"
                        if ckpt_path.exists()
                        else "no checkpoint was written yet"
                    )
                    raise TrainingDiverged(f"{exc}; {kept}") from None
            agent.finalize()
            budget_keys = {"stopped_by_cpu_budget": budget.stopped} if budget else {}
            if sync is not None:
                sync.bill(meter)
            if sync is None:
                return finish_run(config, out, agent, meter, tracker, device, extra=budget_keys)
            if rank > 0:
                return {"rank": rank, **sync.summary()}
            techniques = [*agent.techniques, "gradient_fusion"]
            extra = {**sync.summary(), "real_env_steps_all_workers": meter.real_env_steps * sync.world_size,
                     **budget_keys}  # fmt: skip
            return finish_run(config, out, agent, meter, tracker, device, techniques=techniques, extra=extra)
    except BaseException:
        metrics_log.close()
        if made_here and (out / "metrics.jsonl").stat().st_size == 0:  # never got going (an unreachable
            shutil.rmtree(out, ignore_errors=True)  # tracking server): the same command can simply be run again
        raise
    finally:
        metrics_log.close()
        env.close()
        if sync is not None:
            from frugalrl.fusion.launch import close_distributed

            close_distributed()
