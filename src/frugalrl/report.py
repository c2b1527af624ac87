"""The pipeline's report: one self-contained HTML page (plots inlined) about what a run did and cost.

Sections, each present when its input is: learning curves of every training run (running
episode return against real env steps), the cost breakdown per stage (training FLOPs, env
steps, wall-clock), technique-vs-baseline ratios when a baseline run is given, the PEFT
comparison (its table and plot), the promotion decisions, and any latent visualisation PNG.
"""

from __future__ import annotations

import base64
import html
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class RunInput:
    label: str
    directory: Path

    @property
    def summary(self) -> dict[str, Any]:
        return json.loads((self.directory / "summary.json").read_text())

    def curve(self) -> tuple[list[float], list[float]]:
        steps, returns = [], []
        path = self.directory / "metrics.jsonl"
        if not path.is_file():
            return steps, returns
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if "episode_return" in record and record.get("source", "real") != "virtual":
                steps.append(float(record.get("real_step", record.get("step", 0))))
                returns.append(float(record["episode_return"]))
        return steps, returns


def _png(fig: Any) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    return f'<img alt="plot" src="data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode()}">'


def _curves(runs: list[RunInput]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for run in runs:
        steps, returns = run.curve()
        if steps:
            ax.plot(steps, returns, label=run.label)
    ax.set_xlabel("real env steps")
    ax.set_ylabel("running episode return")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    out = _png(fig)
    plt.close(fig)
    return out


def _table(header: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cost(runs: list[RunInput]) -> str:
    rows = []
    for run in runs:
        s = run.summary
        rows.append([run.label, s.get("algo", "-"), ", ".join(s.get("techniques") or []) or "-",
                     f"{s.get('eval_mean', float('nan')):.2f}", f"{s.get('real_env_steps', 0):,}",
                     f"{s.get('virtual_env_steps', 0):,}", f"{s.get('train_flops', 0) / 1e9:,.2f}",
                     f"{s.get('wall_s', 0):.1f}"])  # fmt: skip
    header = ["stage", "algo", "techniques", "eval return", "real steps", "virtual steps", "train GFLOPs", "wall s"]
    return _table(header, rows)


def _ratios(runs: list[RunInput], baseline: RunInput) -> str:
    base = baseline.summary
    rows = []
    for run in runs:
        s = run.summary
        ratio = {key: s.get(key, 0) / base[key] if base.get(key) else float("nan")
                 for key in ("train_flops", "backward_samples", "wall_s")}  # fmt: skip
        returns = f"{s.get('eval_mean', 0):.2f} vs {base.get('eval_mean', 0):.2f}"
        rows.append([run.label, f"{ratio['train_flops']:.3f}", f"{ratio['backward_samples']:.3f}",
                     f"{ratio['wall_s']:.2f}", returns])  # fmt: skip
    return _table(["run", "FLOPs / baseline", "backward samples / baseline", "time / baseline", "return"], rows)


def _markdown_block(text: str) -> str:
    return f"<pre>{html.escape(text)}</pre>"


def build_report(
    runs: list[RunInput],
    decisions: list[str] | None = None,
    baseline: RunInput | None = None,
    peft_dir: Path | None = None,
    images: list[Path] | None = None,
    title: str = "frugalrl pipeline report",
) -> str:
    """The report's HTML."""
    parts = [f"<h1>{html.escape(title)}</h1>"]
    if runs:
        parts += ["<h2>Learning curves</h2>", _curves(runs), "<h2>Cost per stage</h2>", _cost(runs)]
    if baseline is not None and runs:
        parts += [f"<h2>Technique vs baseline ({html.escape(baseline.label)})</h2>", _ratios(runs, baseline)]
    if peft_dir is not None and (peft_dir / "peft_table.md").is_file():
        parts += ["<h2>PEFT comparison</h2>", _markdown_block((peft_dir / "peft_table.md").read_text())]
        plot = peft_dir / "peft_plot.png"
        if plot.is_file():
            parts.append(f'<img alt="peft" src="data:image/png;base64,{base64.b64encode(plot.read_bytes()).decode()}">')
    if decisions:
        parts += ["<h2>Promotion decisions</h2>", *[_markdown_block(d) for d in decisions]]
    for image in images or []:
        encoded = base64.b64encode(image.read_bytes()).decode()
        img = f'<img alt="{image.stem}" src="data:image/png;base64,{encoded}">'
        parts += [f"<h2>{html.escape(image.stem)}</h2>", img]
    style = "body{font-family:sans-serif;max-width:1000px;margin:2em auto}td,th{border:1px solid #ccc;padding:4px 8px}"
    return f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>" \
           f"<style>{style}</style></head><body>{''.join(parts)}</body></html>\n"  # fmt: skip
