"""One run set-up: the run directory, learner, tracker, checkpointer and callbacks of a run, built one way.

    setup = RunSetup.prepare(config, out, resume=resume)  # plain, latent curriculum, or one torchrun rank
    with setup.tracked(pipeline_run_id) as tracker:       # the MLflow run (None with tracking off)
        setup.run(tracker, on_update=report)              # run_loop with the run's callbacks
        summary = setup.finish(tracker)                   # policy.pt, the evaluation, summary.json

``prepare`` checks the config and ``--out``, pins registry aliases, creates the run directory
(``rundir.start_run_dir``: config.yaml, threads, seeds) and builds the learner through the rollout
source ``rollout.kind`` names (``frugalrl.rollouts``: the real env behind the learner ``config.algo``
names, or the latent curriculum), then starts it, or restores it from ``checkpoint.pt`` on a resume.
Under torchrun every worker builds the same learner with its gradients fused; rank 0 owns ``--out``,
reports and checkpoints, the others write into ``--out/rankN`` with tracking off.

Pretraining and fine-tuning drive a learner they built themselves (``RunSetup.around``): the same
loop and callbacks and a metrics.jsonl, but no checkpoint, CPU budget, progress bar or MLflow run of
their own (their callers log and register what they made, and run many of them side by side).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import torch

from frugalrl.algos.base import Learner
from frugalrl.algos.gradient_sync import LOCAL_SYNC
from frugalrl.checkpoint import CHECKPOINT_FILE, load_checkpoint
from frugalrl.config import ExperimentConfig
from frugalrl.cost import CostMeter
from frugalrl.envs.factory import check_env
from frugalrl.errors import FrugalError, Interrupted, TrainingDiverged
from frugalrl.eval_during import EvalDuringTraining
from frugalrl.evaluation import protocol_note
from frugalrl.fusion.launch import Synchronizer, close_distributed, init_distributed, under_torchrun
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
from frugalrl.resume import check_resumable, checkpoint_state, interrupted_message, restore
from frugalrl.rollouts import build_run_learner
from frugalrl.rundir import (
    check_new_run_dir,
    finish_run,
    metrics_log_lines,
    preflight,
    start_run_dir,
    truncate_metrics_log,
)
from frugalrl.runlock import RunLock, check_not_busy
from frugalrl.tracking.offline import pending, sync_run_dir
from frugalrl.tracking.provenance import pin_pretrained
from frugalrl.tracking.runs import RunTracker


def run_callbacks(
    meter: CostMeter,
    metrics_log: IO[str] | None,
    *,
    tracker: RunTracker | None = None,
    progress: TrainingProgress | None = None,
    on_update: Callable[[Learner, dict[str, float]], bool | None] | None = None,
    extra: Sequence[Callback] = (),
    budget: CpuBudget | None = None,
    checkpointer: Checkpointer | None = None,
    evaluator: EvalDuringTraining | None = None,
) -> list[Callback]:
    """The run loop's callbacks in the one order every run uses (docs/architecture.md, "The run loop"):
    each sees the metrics the ones before it added (the evaluation during training adds its ``eval/*`` keys
    before the row is written), and the checkpoint comes last."""
    hooks: list[Callback] = [Throughput(meter), *([evaluator] if evaluator else [])]
    hooks += [MetricsLog(metrics_log)] if metrics_log is not None else []
    hooks += [Tracking(tracker)] if tracker is not None else []
    hooks += [Progress(progress)] if progress is not None else []
    hooks += [OnUpdate(on_update)] if on_update is not None else []
    hooks += [*extra, *([budget] if budget else []), *([checkpointer] if checkpointer else [])]
    return hooks


@dataclass
class RunSetup:
    """What a run is made of once set up; ``prepare`` (a training run) or ``around`` (pretraining) builds it."""

    config: ExperimentConfig
    out: Path | None  # the run directory (None: a pretraining step that keeps no metrics.jsonl)
    learner: Learner
    meter: CostMeter
    device: torch.device
    sync: Synchronizer | None = None  # this worker's gradient fusion under torchrun
    checkpoint: dict[str, Any] | None = None  # what a resume continues from
    made_here: bool = False  # created by this set-up: removed again if the run never gets going
    training: bool = True  # MLflow, checkpoints, the CPU budget and the progress bar (pretraining: none)
    metrics_log: IO[str] | None = None
    checkpointer: Checkpointer | None = None
    budget: CpuBudget | None = None
    evaluator: EvalDuringTraining | None = None  # eval.every_steps: evaluations during training, the best kept
    lock: RunLock | None = None  # rank 0's hold on the run directory (runlock), released as ``tracked`` ends

    @property
    def rank(self) -> int:
        return self.sync.rank if self.sync else 0

    @property
    def ckpt_path(self) -> Path:
        assert self.out is not None
        return self.out / CHECKPOINT_FILE

    # ------------------------------------------------------------------ building it
    @classmethod
    def prepare(cls, config: ExperimentConfig, out: Path, *, resume: bool = False) -> RunSetup:
        """Check the config and ``out``, create (or reopen) the run directory, build the learner (started,
        or restored from ``out/checkpoint.pt`` with ``resume``). A set-up that fails leaves no half-made
        run directory behind. The run directory is this process's alone from before its first change
        until ``tracked`` ends (``runlock``): one another live process trains into is refused."""
        out = Path(out)
        first_rank = not (under_torchrun() and int(os.environ.get("RANK", "0")) > 0)  # rank 0 owns the shared --out
        if first_rank:
            check_not_busy(out)  # a live run's directory: said first, not "not empty" or "nothing to resume"
        if not resume and first_rank:
            check_new_run_dir(out)
        made_here = first_rank and not resume and not out.exists()
        if not resume:
            config, pinned = pin_pretrained(config)  # registry aliases move: the run names the version it used
            for line in pinned:
                print(line)
        check_env(config)  # an env or algorithm the run cannot use fails here, before anything is written
        if first_rank and not resume and (note := protocol_note(config.env, config.eval.episodes)):
            print(note)
        with contextlib.ExitStack() as held:  # the run directory's lock, let go again if the set-up fails
            with preflight(out) if first_rank else contextlib.nullcontext():
                if resume and config.latent_curriculum:  # its learner writes no checkpoint yet: say so, not "not found"
                    raise FrugalError("latent-curriculum runs cannot be resumed yet; start a new run with --out")
                setup = cls._learner_run(config, out, resume, held)
            held.pop_all()  # set up: the run holds it until ``tracked`` ends
        setup.made_here = made_here
        return setup

    @classmethod
    def _learner_run(cls, config: ExperimentConfig, out: Path, resume: bool, held: contextlib.ExitStack) -> RunSetup:
        """The learner ``rollout.kind``'s source builds, on this worker's share of a multi-worker run; rank 0
        locks the run directory (``runlock``) into ``held`` once the checks that only read it have passed."""
        sync = None
        if under_torchrun():  # one of N workers: gradients are fused; rank 0 alone reports and checkpoints
            sync = init_distributed(config)
            if resume:
                raise FrugalError("multi-worker runs cannot be resumed yet; start a new run with --out")
            if sync.rank > 0:
                out = out / f"rank{sync.rank}"
                tracking = config.tracking.model_copy(update={"enabled": False})
                config = config.model_copy(update={"tracking": tracking})
        checkpoint = None
        if resume:
            checkpoint = load_checkpoint(out / CHECKPOINT_FILE)
            check_resumable(checkpoint, config, out)  # refused before config.yaml or the checkpoint is rewritten
            metrics_log_lines(out)  # a corrupt log is refused before anything is rewritten
            pending(out)  # and so is a corrupt offline buffer
        lock = held.enter_context(RunLock.take(out)) if sync is None or sync.rank == 0 else None  # before any write
        device = start_run_dir(config, out)
        meter = CostMeter()
        # the same initial weights on every worker; workers fuse their gradients through ``sync``
        learner = build_run_learner(config, out, meter, device, sync or LOCAL_SYNC)
        rank = sync.rank if sync else 0
        if sync:
            torch.manual_seed(config.seed + 1000 * rank)  # each worker samples its own actions and minibatches
            learner.seed_sampling(config.seed + 1000 * rank)
        if checkpoint is not None:
            restore(checkpoint, learner, meter, config)
            dropped = truncate_metrics_log(out, learner.update)
            redo = f"; {dropped} later lines of metrics.jsonl are redone" if dropped else ""
            print(f"resuming {out} from update {learner.update} (step {learner.global_step:,}){redo}")
        else:
            learner.start(config.seed + 1000 * rank)  # and plays its own episodes
        return cls(config, out, learner, meter, device, sync=sync, checkpoint=checkpoint, lock=lock)

    @classmethod
    def around(
        cls, config: ExperimentConfig, learner: Learner, meter: CostMeter, device: torch.device, out: Path | None
    ) -> RunSetup:
        """A set-up around a learner its caller built and started (pretraining, fine-tuning); metrics.jsonl
        goes to ``out`` (created here), none without."""
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
        return cls(config, out, learner, meter, device, training=False)

    # ------------------------------------------------------------------ running it
    def _tracker(self, pipeline_run_id: str | None) -> Any:
        """The MLflow run this run logs to (a resume continues its own; a copied directory gets a new one)."""
        if not (self.training and self.config.tracking.enabled):
            return contextlib.nullcontext(None)
        checkpoint, out = self.checkpoint, self.out
        assert out is not None
        resume_id = checkpoint.get("mlflow_run_id") if checkpoint else None
        tags = {}
        if checkpoint and checkpoint.get("run_dir") not in (None, str(out.resolve())):  # a copy (or a move)
            tags = {"frugalrl.copied_from_run_id": str(resume_id), "frugalrl.copied_from_dir": checkpoint["run_dir"]}
            print(f"{out} is a copy of {checkpoint['run_dir']}: it gets its own MLflow run (copied from {resume_id})")
            resume_id = None
        if resume_id is not None and not tags and pending(out):  # what the last attempt could not send goes first
            print(sync_run_dir(out, lock=False))  # this process holds the run's lock
        return RunTracker(self.config, run_id=resume_id, pipeline_run_id=pipeline_run_id, tags=tags, buffer_dir=out)

    @contextlib.contextmanager
    def tracked(self, pipeline_run_id: str | None = None) -> Iterator[RunTracker | None]:
        """The MLflow run (None with tracking off) with metrics.jsonl open; afterwards the env and the
        workers' process group are closed, and a run directory made here that never got going is removed
        (an unreachable tracking server: the same command can simply be run again)."""
        try:
            tracker_cm = self._tracker(pipeline_run_id)
        except BaseException:
            if self.made_here and self.out is not None:
                shutil.rmtree(self.out, ignore_errors=True)
            self._close()  # and the lock: after the removal, so no other process starts in the directory first
            raise
        # a resume appends to the rows up to its checkpoint; a pretraining step run again starts its log afresh
        mode = "a" if self.training else "w"
        self.metrics_log = (self.out / "metrics.jsonl").open(mode) if self.out is not None else None
        try:
            with tracker_cm as tracker:
                yield tracker
        except BaseException:
            self._close_log()
            if self.made_here and self.out is not None and (self.out / "metrics.jsonl").stat().st_size == 0:
                shutil.rmtree(self.out, ignore_errors=True)
            raise
        finally:
            self._close_log()
            self._close()

    def _close_log(self) -> None:
        if self.metrics_log is not None:
            self.metrics_log.close()

    def _close(self) -> None:
        try:
            self.learner.env.close()
            if self.sync is not None:
                close_distributed()
        finally:
            if self.lock is not None:  # the run is over: another process may resume it
                self.lock.release()

    def _checkpointer(self, tracker: RunTracker | None) -> Checkpointer | None:
        """Rank 0 of a resumable training run checkpoints (last among the callbacks)."""
        if not (self.training and self.learner.resumable and self.rank == 0):
            return None
        run_id = tracker.run_id if tracker else None
        meter, config, out = self.meter, self.config, self.out

        def state(learner: Learner) -> dict[str, Any]:
            if tracker is not None:  # MLflow holds every step up to the checkpoint: a resume redoes the rest
                tracker.flush()
            return checkpoint_state(learner, meter, config, run_id, out)

        return Checkpointer(self.ckpt_path, state, config.checkpoint.every_updates)

    def run(
        self,
        tracker: RunTracker | None = None,
        *,
        interactive: bool | None = None,
        on_update: Callable[[Learner, dict[str, float]], bool | None] | None = None,
        callbacks: Sequence[Callback] = (),
    ) -> int:
        """Drive the learner through ``run_loop`` with the run's callbacks, then ``finalize`` it; the updates run.

        ``on_update(learner, metrics)`` runs after every update (the tuner reports and prunes there);
        ``callbacks`` are further hooks, called before the CPU budget and the checkpoint."""
        learner, config = self.learner, self.config
        self.checkpointer = self._checkpointer(tracker)
        self.budget = CpuBudget(config.cpu_budget_s) if self.training and config.cpu_budget_s else None
        if self.training and self.rank == 0 and config.eval.every_steps and self.out is not None:
            self.evaluator = EvalDuringTraining(config, self.out, self.meter)
        progress: Any = contextlib.nullcontext(None)
        if self.training:
            header = f"mlflow run {tracker.run_id}: {tracker.run_url()}" if tracker is not None else None
            progress = TrainingProgress(learner.total_steps, learner.global_step, config.log_every_updates, interactive,
                                        header=header)  # fmt: skip
        with progress as bar:
            hooks = run_callbacks(self.meter, self.metrics_log, tracker=tracker, progress=bar, on_update=on_update,
                                  extra=callbacks, budget=self.budget, checkpointer=self.checkpointer,
                                  evaluator=self.evaluator)  # fmt: skip
            try:
                updates = run_loop(learner, hooks)
            except KeyboardInterrupt:
                if not self.training:
                    raise
                saved = self.checkpointer.saved_at if self.checkpointer is not None else None
                raise Interrupted(interrupted_message(learner, saved, self.ckpt_path, self.out)) from None
            except TrainingDiverged as exc:
                if not (self.training and learner.resumable):  # nothing to resume from: the error as raised
                    raise
                ckpt = self.ckpt_path
                kept = f"last good checkpoint kept at {ckpt}" if ckpt.exists() else "no checkpoint was written yet"
                raise TrainingDiverged(f"{exc}; {kept}") from None
        learner.finalize()
        return updates

    def finish(self, tracker: RunTracker | None) -> dict[str, Any]:
        """Export, evaluate and write summary.json (``rundir.finish_run``); a worker of rank > 0 only
        reports its fusion statistics, rank 0 adds every worker's."""
        assert self.out is not None
        config, out, learner, meter, sync = self.config, self.out, self.learner, self.meter, self.sync
        budget_keys = {"stopped_by_cpu_budget": self.budget.stopped} if self.budget else {}
        if self.evaluator is not None:
            budget_keys["best_eval"] = self.evaluator.best
        if sync is None:
            summary = finish_run(config, out, learner, meter, tracker, self.device, extra=budget_keys)
            return self._said_below_best(summary)
        sync.bill(meter)
        if self.rank > 0:
            return {"rank": self.rank, **sync.summary()}
        techniques = [*learner.techniques, "gradient_fusion"]
        extra = {**sync.summary(), "real_env_steps_all_workers": meter.real_env_steps * sync.world_size,
                 **budget_keys}  # fmt: skip
        summary = finish_run(config, out, learner, meter, tracker, self.device, techniques=techniques, extra=extra)
        return self._said_below_best(summary)

    def _said_below_best(self, summary: dict[str, Any]) -> dict[str, Any]:
        """One line when the final evaluation is below the best one during training."""
        if self.evaluator is not None and (line := self.evaluator.below_best(summary["eval_mean"])):
            print(line)
        return summary
