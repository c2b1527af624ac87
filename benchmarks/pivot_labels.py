"""PivotRL label definitions compared: how they agree, and how well an evaluator learns each.

Collects one labelled dataset of baseline-PPO rollouts per env (``selection.settings.evaluator.pretrain_steps``
env steps, all three labels computed with the policy of each moment), then reports the Spearman
correlation between the label definitions and, for each label, the held-out Spearman of an
evaluator pretrained on it (``pretrain_epochs`` epochs, 80/20 split).

    python -m benchmarks.pivot_labels --envs CartPole-v1 Acrobot-v1 --write
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import torch

from frugalrl.config import load_config
from frugalrl.pivot.labels import spearman
from frugalrl.pivot.pretrain import LABEL_KINDS, collect_dataset, pretrain_from_dataset

from . import _harness, _report
from ._pivot import CONFIGS

HEADER = ["env", "samples", "Spearman policy_gradient vs grad_norm", "advantage vs grad_norm",
          "policy_gradient vs advantage", "evaluator held-out Spearman: policy_gradient", "advantage",
          "grad_norm"]  # fmt: skip
AGREEMENT = {"pg~grad": ("policy_gradient", "grad_norm"), "adv~grad": ("advantage", "grad_norm"),
             "pg~adv": ("policy_gradient", "advantage")}  # fmt: skip


def run(args: argparse.Namespace) -> list[dict]:
    torch.set_num_threads(1)
    common = _report.batch_common()
    with tempfile.TemporaryDirectory() as tmp:

        def one(env_id: str) -> dict:  # in this process, one env after another
            config = load_config(_report.REPO_ROOT / "configs" / CONFIGS[env_id], ["tracking.enabled=false"])
            path = Path(tmp) / f"{env_id}.npz"
            info = collect_dataset(config, path, kinds=LABEL_KINDS)
            with np.load(path) as data:
                labels = {k: torch.as_tensor(data[f"label_{k}"]) for k in LABEL_KINDS}
            agreement = {name: spearman(labels[a], labels[b]) for name, (a, b) in AGREEMENT.items()}
            learned = {}
            for kind in LABEL_KINDS:
                config_k = load_config(
                    _report.REPO_ROOT / "configs" / CONFIGS[env_id],
                    ["tracking.enabled=false", f"selection.settings.label={kind}"],
                )
                learned[kind] = pretrain_from_dataset(config_k, path)[1]["spearman"]
            return dict(env_id=env_id, config_hash=config.hash(), samples=info["samples"], agreement=agreement,
                        learned=learned)  # fmt: skip

        return _harness.measure(
            args.envs, one, args.results, common, lambda row: f"{row['agreement']} {row['learned']}"
        )


def render(rows: list[dict], results: Path) -> str:
    table = [[r["env_id"], f"{r['samples']:,}", *(f"{r['agreement'][k]:.3f}" for k in AGREEMENT),
              *(f"{r['learned'][k]:.3f}" for k in LABEL_KINDS)] for r in rows]  # fmt: skip
    return "\n".join([
        "How the three label definitions agree (rank correlation over the same states), and how well the "
        "evaluator predicts each on held-out states. `grad_norm` is the seed's gradient saliency taken "
        "literally; `policy_gradient` (the default) is its free proxy.",
        "",
        *_report.rows_lines(rows, results),
        "",
        _report.markdown_table(HEADER, table),
    ])  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1", "Acrobot-v1"], choices=list(CONFIGS))
    _report.add_output_args(parser, "pivot_labels")
    args = parser.parse_args()
    _report.run_or_render("pivot_labels", args, run, render)


if __name__ == "__main__":
    main()
