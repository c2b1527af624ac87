"""PivotRL label definitions compared: how they agree, and how well an evaluator learns each.

Collects one labelled dataset of baseline-PPO rollouts per env (``pivot.evaluator.pretrain_steps``
env steps, all three labels computed with the policy of each moment), then reports the Spearman
correlation between the label definitions and, for each label, the held-out Spearman of an
evaluator pretrained on it (``pretrain_epochs`` epochs, 80/20 split).

    python benchmarks/pivot_labels.py --envs CartPole-v1 Acrobot-v1 --write
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import torch

import _report
from frugalrl.config import load_config
from frugalrl.pivot.labels import spearman
from frugalrl.pivot.pretrain import LABEL_KINDS, collect_dataset, pretrain_from_dataset
from pivot_vs_ppo import CONFIGS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1", "Acrobot-v1"], choices=list(CONFIGS))
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    load_start = _report.load_average()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for env_id in args.envs:
            config = load_config(_report.REPO_ROOT / "configs" / CONFIGS[env_id], ["tracking.enabled=false"])
            path = Path(tmp) / f"{env_id}.npz"
            info = collect_dataset(config, path, kinds=LABEL_KINDS)
            with np.load(path) as data:
                labels = {k: torch.as_tensor(data[f"label_{k}"]) for k in LABEL_KINDS}
            agreement = {
                "pg~grad": spearman(labels["policy_gradient"], labels["grad_norm"]),
                "adv~grad": spearman(labels["advantage"], labels["grad_norm"]),
                "pg~adv": spearman(labels["policy_gradient"], labels["advantage"]),
            }
            learned = {}
            for kind in LABEL_KINDS:
                config_k = load_config(
                    _report.REPO_ROOT / "configs" / CONFIGS[env_id], ["tracking.enabled=false", f"pivot.label={kind}"]
                )
                learned[kind] = pretrain_from_dataset(config_k, path)[1]["spearman"]
            rows.append([env_id, f"{info['samples']:,}", *(f"{agreement[k]:.3f}" for k in agreement),
                         *(f"{learned[k]:.3f}" for k in LABEL_KINDS)])  # fmt: skip
            print(rows[-1], flush=True)
    header = ["env", "samples", "Spearman policy_gradient vs grad_norm", "advantage vs grad_norm",
              "policy_gradient vs advantage", "evaluator held-out Spearman: policy_gradient", "advantage",
              "grad_norm"]  # fmt: skip
    text = "\n".join([
        "How the three label definitions agree (rank correlation over the same states), and how well the "
        "evaluator predicts each on held-out states. `grad_norm` is the seed's gradient saliency taken "
        "literally; `policy_gradient` (the default) is its free proxy.",
        "",
        *_report.machine_lines(_report.command_line(), load_start, _report.load_average()),
        "",
        _report.markdown_table(header, rows),
    ])  # fmt: skip
    print(text)
    if args.write:
        _report.write_section("pivot_labels", text)


if __name__ == "__main__":
    main()
