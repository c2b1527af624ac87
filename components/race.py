"""Components ``race_run`` and ``race_decide``: one run of a race (a ParallelFor iteration), then the decision."""

from frugalrl.components import FRUGALRL_IMAGE
from kfp import dsl
from kfp.dsl import Artifact, Input, Markdown, Model, Output


@dsl.component(base_image=FRUGALRL_IMAGE, install_kfp_package=False)
def race_run(
    config_yaml: str, run: dict, cpu_budget_s: float, pretrained: Input[Model] = None, stage: str = ""
) -> dict:
    """One contender on one seed to the CPU budget (``frugalrl.ops.steps.race_run_step``); its row. ``run``:
    the ParallelFor's item, ``{"contender", "overrides", "seed"}``."""
    import tempfile

    from frugalrl.ops.steps import race_run_step

    path = pretrained.path if pretrained is not None else ""
    overrides = [str(o) for o in run["overrides"]]
    return race_run_step(config_yaml, overrides, str(run["contender"]), int(run["seed"]), float(cpu_budget_s),
                         tempfile.mkdtemp(prefix="race-"), pretrained=path, stage=stage)  # fmt: skip


@dsl.component(base_image=FRUGALRL_IMAGE, install_kfp_package=False)
def race_decide(race: dict, rows: list, pipeline_run_id: str, table: Output[Markdown], files: Output[Artifact]) -> list:
    """The decision (``frugalrl.ops.steps.race_decision_step``): the table as Markdown, the race's files, and
    the winner's overrides, which the tune and train stages add to theirs."""
    from pathlib import Path

    from frugalrl.ops.steps import race_decision_step

    decision = race_decision_step(race, list(rows), files.path, pipeline_run_id)
    Path(table.path).write_text(decision["table"])
    return [str(o) for o in decision["overrides"]]
