"""One figure of an off-policy run's control signals: hyperparameters, exploration and replay over time."""

from __future__ import annotations

import json
from pathlib import Path

PANELS = (
    ("hyperparameters", ("learning_rate", "gamma")),
    ("exploration", ("epsilon", "temperature", "alpha", "q_entropy")),
    ("replay tiers (transitions)", ("replay_hot_size", "replay_warm_size", "replay_cold_size")),
    ("draws from the top-10% |TD error|", ("replay_top10_share",)),
    ("episode return", ("episode_return",)),
)


def plot_training_trace(metrics_path: Path, out: Path) -> Path | None:
    """Write ``out`` (PNG) from metrics.jsonl; None when the run logged none of these series."""
    rows = [json.loads(line) for line in Path(metrics_path).read_text().splitlines() if line.strip()]
    panels = [(title, [k for k in keys if any(k in r for r in rows)]) for title, keys in PANELS]
    panels = [(title, keys) for title, keys in panels if keys]
    if not rows or not panels:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 2.2 * len(panels)), sharex=True, squeeze=False)
    for ax, (title, keys) in zip(axes[:, 0], panels, strict=True):
        for key in keys:
            points = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), int | float)]
            if points:
                ax.plot(*zip(*points, strict=True), label=key)
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7, loc="best")
        if title == "hyperparameters" and any(k == "learning_rate" for k in keys):
            ax.set_yscale("log")
    axes[-1, 0].set_xlabel("env step")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return out
