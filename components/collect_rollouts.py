"""Component ``collect_rollouts``: a pretraining stage's data as a Dataset (game frames, labelled PPO rollouts, ...)."""

from frugalrl.components import FRUGALRL_IMAGE
from kfp import dsl
from kfp.dsl import Dataset, Output


@dsl.component(base_image=FRUGALRL_IMAGE, install_kfp_package=False)
def collect_rollouts(config_yaml: str, overrides: list, stage: str, dataset: Output[Dataset]):
    """Collect with ``frugalrl.ops.steps.collect_step`` for pretraining stage ``stage``; the Dataset is an npz file."""
    from frugalrl.ops.steps import collect_step

    info = collect_step(config_yaml, [str(o) for o in overrides], dataset.path, stage)
    dataset.metadata.update(
        {"sha256": info["sha256"], "samples": info["samples"], "env_id": info["env_id"], "kind": info["kind"]}
    )
