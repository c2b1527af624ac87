"""The training entry point: config in, run directory and MLflow run out.

``train(config, out_dir)`` writes into ``out_dir``:

    config.yaml      the resolved config (what actually ran)
    checkpoint.pt    the latest checkpoint (atomic), for --resume
    metrics.jsonl    one line of metrics per update
    policy.pt        the exported policy (weights + observation normalisation)
    summary.json     the run contract (docs/architecture.md, "The run contract")

Run it as ``frugalrl train CONFIG --out DIR`` or ``python -m frugalrl train CONFIG --out DIR``. How a
run is put together (run directory, learner, tracker, checkpointer, callbacks) is ``frugalrl.run_setup``;
the run directory helpers (``start_run_dir``, ``finish_run``) live in ``frugalrl.rundir``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from frugalrl.algos.base import Learner
from frugalrl.config import ExperimentConfig
from frugalrl.loop import Callback
from frugalrl.run_setup import RunSetup


def train(
    config: ExperimentConfig,
    out_dir: str | Path,
    *,
    resume: bool = False,
    interactive: bool | None = None,
    on_update: Callable[[Learner, dict[str, float]], bool | None] | None = None,
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
    setup = RunSetup.prepare(config, Path(out_dir), resume=resume)
    with setup.tracked(pipeline_run_id) as tracker:
        setup.run(tracker, interactive=interactive, on_update=on_update, callbacks=callbacks)
        return setup.finish(tracker)
