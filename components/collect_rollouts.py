"""Component ``collect_rollouts``: baseline-PPO rollouts with importance labels, as a Dataset."""

from kfp import dsl
from kfp.dsl import Dataset, Output

from components import FRUGALRL_IMAGE


@dsl.component(base_image=FRUGALRL_IMAGE, install_kfp_package=False)
def collect_rollouts(config_yaml: str, overrides: list, dataset: Output[Dataset]):
    """Collect labelled rollouts with ``frugalrl.steps.collect_step``; the Dataset is an npz file."""
    from frugalrl.steps import collect_step

    info = collect_step(config_yaml, [str(o) for o in overrides], dataset.path)
    dataset.metadata.update({"sha256": info["sha256"], "samples": info["samples"], "env_id": info["env_id"]})
