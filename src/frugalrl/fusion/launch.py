"""Running under torchrun: process group set-up, per-rank roles, and launching torchrun itself.

``frugalrl train CONFIG --workers N`` (or ``distributed.workers: N``) re-runs the same command
under ``torchrun --standalone --nproc-per-node N``; every worker then finds ``RANK`` and
``WORLD_SIZE`` in its environment. The backend is gloo on CPU and nccl on CUDA (``auto``).
Collectives time out after ``distributed.timeout_s``: a worker that dies makes the others fail
instead of hang, and torchrun ends the job with a non-zero exit code.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from frugalrl.config import ExperimentConfig
from frugalrl.cost import CostMeter
from frugalrl.errors import FrugalError
from frugalrl.fusion.reducers import make_reducer
from frugalrl.fusion.sync import GradientFusion
from frugalrl.fusion.trainjob import torchrun_command


def under_torchrun() -> bool:
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


@dataclass
class Synchronizer:
    """A worker's ``GradientSync`` (``frugalrl.algos.gradient_sync``): one ``GradientFusion`` per
    parameter group a learner steps (policy, critic, temperature)."""

    config: Any
    world_size: int
    rank: int
    groups: dict[str, GradientFusion] = field(default_factory=dict)

    def __call__(self, params: Any, group: str = "policy") -> None:
        if group not in self.groups:
            self.groups[group] = make_reducer(self.config, self.world_size)
        self.groups[group].synchronize(params)

    def summary(self) -> dict[str, float]:
        sent = sum(g.bytes_sent for g in self.groups.values())
        dense = sum(g.dense_bytes for g in self.groups.values())
        steps = max((g.steps for g in self.groups.values()), default=0)
        wire = sum(g.wire_bytes for g in self.groups.values())
        return {
            "workers": self.world_size,
            "fusion_mode": self.config.kind,
            # the share of each gradient tensor sent: the reducer's ``share`` setting, 1 for one without (dense)
            "fusion_topk": getattr(self.config.built_settings(), "share", 1.0),
            "bytes_sent": sent,
            "dense_equivalent_bytes": dense,
            "compression_ratio": dense / sent if sent else 1.0,
            "bytes_sent_per_step": sent / steps if steps else 0.0,
            "sync_steps": steps,
            "wire_bytes_per_worker": wire,
            "wire_model": "ring: all_reduce 2(W-1)/W x payload, all_gather (W-1) x payload, per worker",
            **{
                f"fusion_{part}_s": round(sum(g.seconds[part] for g in self.groups.values()), 3)
                for part in ("encode", "comm", "decode")
            },  # fmt: skip
        }

    def bill(self, meter: CostMeter) -> None:
        """Add the synchronisation's element operations to ``meter`` (phase ``gradient_sync``, kind train)."""
        ops = sum(g.element_ops for g in self.groups.values())
        steps = max((g.steps for g in self.groups.values()), default=0)
        if steps:
            meter.flops_per_sample["gradient_sync"] = ops / steps
            meter.count("gradient_sync", steps, "train")


def init_distributed(config: ExperimentConfig) -> Synchronizer:
    """Join the process group torchrun set up; the gradient synchroniser for this worker."""
    import torch.distributed as dist

    backend = config.distributed.backend
    if backend == "auto":
        backend = "nccl" if config.device != "cpu" and torch.cuda.is_available() else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=config.distributed.timeout_s))
    return Synchronizer(config.distributed, dist.get_world_size(), dist.get_rank())


def close_distributed() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def torchrun(argv: list[str], workers: int) -> int:
    """Run ``frugalrl train ARGV`` as ``workers`` torchrun workers on this machine; their exit code."""
    command = torchrun_command(argv, python=sys.executable, nproc_per_node=workers, standalone=True)
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    return subprocess.run(command, env=env).returncode


def train_on_workers(config_path: Path, out: Path, overrides: list[str], workers: int) -> dict[str, Any]:
    """Train ``config_path`` (with ``--set`` ``overrides``) into ``out`` on ``workers`` torchrun workers
    on this machine; the run's summary, which rank 0 writes.

    ``workers`` is the config's ``distributed.workers``: the caller has loaded the config, so one that
    does not validate fails once, before any worker starts, instead of once in every worker.
    A worker that fails is a ``FrugalError``; its own log, already on stderr, says why.
    """
    sets = [arg for override in overrides for arg in ("--set", override)]
    code = torchrun([str(config_path), "--out", str(out), *sets], workers)
    if code != 0:
        raise FrugalError(f"a training worker failed (exit code {code}); its log above says why")
    return json.loads((out / "summary.json").read_text())
