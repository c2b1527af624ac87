"""The pipeline's report: one self-contained HTML page (plots inlined) about what a run did and cost.

One section per branch of the pipeline (CartPole with PivotRL, the latent RoadRunner curriculum,
the MuJoCo PEFT transfer), each holding what its inputs allow: each policy's recorded episode
(``frugalrl.ops.video``) as an inline GIF or the line saying why there is none, the promotion
decisions with their statistics, the learning curve (running episode return against real env
steps), the cost per stage (training FLOPs, env steps, wall-clock), the PEFT comparison (table
and plot), the seed documents' claims beside this run's figures (``frugalrl.ops.claims``) and any
latent visualisation PNG. Technique-vs-baseline ratios close the page when a baseline is given.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from frugalrl.ops.claims import claim_rows, run_summary


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
    ax.set_ylabel("training return (mean of the last 100 episodes)")
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
        if not s.get("algo"):  # not a training run (the PEFT table holds the adapted policy's cost)
            continue
        score = "-"
        if s.get("eval_mean") is not None:
            score = f"{s['eval_mean']:.2f} over {s.get('eval_episodes', '?')} episodes"
        techniques = ", ".join(s.get("techniques") or []) or "-"
        flops = [f"{s.get(k, 0) / 1e9:,.2f}" for k in ("train_flops", "inference_flops", "pretrain_flops")]
        total = s.get("total_flops", s.get("train_flops", 0))
        rows.append([run.label, s.get("algo", "-"), techniques, score, f"{s.get('real_env_steps', 0):,}",
                     f"{s.get('virtual_env_steps', 0):,}", *flops, f"{total / 1e9:,.2f}",
                     f"{s.get('wall_s', 0):.1f}"])  # fmt: skip
    header = ["stage", "algo", "techniques", "return at training end", "real steps", "virtual steps",
              "learning GFLOPs", "acting GFLOPs", "pretraining GFLOPs", "total GFLOPs", "wall s"]  # fmt: skip
    note = ("<p>Return at training end: the run's own evaluation, the deterministic policy over the episodes "
            "shown (the config's <code>eval</code>). The promotion decision above evaluates again, on its own "
            "seeds and number of episodes, so its mean may differ.</p>")  # fmt: skip
    return note + _table(header, rows)


def _world_model(runs: list[RunInput]) -> str:
    """The latent runs' world model against their real play (``frugalrl.latent.quality``): table and bars."""
    measured = [(run.label, run.summary) for run in runs if run.summary.get("wm_latent_error_k") is not None]
    if not measured:
        return ""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def fmt(value: Any, spec: str = "{:.3f}") -> str:
        return "-" if value is None else spec.format(value)

    # latent errors in significant figures: on RoadRunner both are under 1e-5, and fixed decimals showed 0 / 0

    rows = [[label, fmt(s.get("wm_horizon_k"), "{:.0f}"),
             f"{fmt(s['wm_latent_error_k'], '{:.3g}')} / {fmt(s['wm_latent_error_k_copy'], '{:.3g}')}",
             f"{fmt(s.get('wm_reward_accuracy'))} ({fmt(s.get('wm_reward_accuracy_nonzero'))})",
             fmt(s.get("wm_done_accuracy")),
             f"{fmt(s.get('wm_imagined_return'), '{:.2f}')} / {fmt(s.get('wm_real_return'), '{:.2f}')}",
             f"{fmt(s.get('wm_imagined_events'), '{:.2f}')} / {fmt(s.get('wm_real_events'), '{:.2f}')}",
             f"{fmt(s.get('wm_imagined_survival'), '{:.2f}')} / {fmt(s.get('wm_real_survival'), '{:.2f}')}",
             fmt(s.get("wm_reward_auc"), "{:.2f}"),
             f"{s.get('wm_gate', '-')}: {s.get('wm_gate_reason', '')}".rstrip(": ")]
            for label, s in measured]  # fmt: skip
    header = ["run", "k", "k-step latent error: model / copy-last", "reward accuracy (on rewarded steps)",
              "termination accuracy", "return over k steps: imagined / real",
              "reward events over k steps: imagined / real", "still in the episode after k steps: imagined / real",
              "reward AUC", "diagnostic gate"]  # fmt: skip
    fig, (error_ax, return_ax) = plt.subplots(1, 2, figsize=(9, 3.5))
    x = range(len(measured))
    width = 0.38
    for ax, (a, b), names in (
        (error_ax, ("wm_latent_error_k", "wm_latent_error_k_copy"), ("world model", "copy-last")),
        (return_ax, ("wm_imagined_return", "wm_real_return"), ("imagined", "real")),
    ):
        ax.bar([i - width / 2 for i in x], [s[a] or 0.0 for _, s in measured], width, label=names[0])
        ax.bar([i + width / 2 for i in x], [s[b] or 0.0 for _, s in measured], width, label=names[1])
        ax.set_xticks(list(x), [label for label, _ in measured], rotation=15)
        ax.legend()
        ax.grid(alpha=0.3, axis="y")
    error_ax.set_title("k-step latent error (lower is better)")
    return_ax.set_title("return over k steps, same starts")
    fig.tight_layout()
    plot = _png(fig)
    plt.close(fig)
    note = ("<p>On each run's last real rollout: a world model that does not beat copy-last, or whose "
            "imagined return differs from the real one, teaches the policy another game. The diagnostic gate is "
            "this check, made after training: <em>failed</em> says the imagined game differed from the real one "
            "(the reason follows), so the imagined steps taught little; it does not decide promotion, which "
            "compares scores on the real game alone.</p>")  # fmt: skip
    return note + _table(header, rows) + plot


def _ratios(runs: list[RunInput], baseline: RunInput) -> str:
    base = baseline.summary
    rows = []
    for run in runs:
        s = run.summary
        ratio = {key: s.get(key, 0) / base[key] if base.get(key) else float("nan")
                 for key in ("total_flops", "backward_samples", "wall_s")}  # fmt: skip
        returns = f"{s.get('eval_mean', 0):.2f} vs {base.get('eval_mean', 0):.2f}"
        rows.append([run.label, f"{ratio['total_flops']:.3f}", f"{ratio['backward_samples']:.3f}",
                     f"{ratio['wall_s']:.2f}", returns])  # fmt: skip
    return _table(["run", "total FLOPs / baseline", "backward samples / baseline", "time / baseline", "return"], rows)


def _inline(text: str) -> str:
    """Escaped text with the Markdown this project writes inline: **bold** and `code`."""
    text = html.escape(text)
    text = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", text)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", text)


def _markdown(text: str) -> str:
    """HTML for the Markdown the pipeline writes (headings, bullet lists, pipe tables, paragraphs)."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                cells = [c.strip() for c in lines[i].strip().strip("|").split("|")]
                if not all(set(c) <= set("-: ") for c in cells):  # skip the |---| separator
                    rows.append(cells)
                i += 1
            head = "".join(f"<th>{_inline(c)}</th>" for c in rows[0]) if rows else ""
            body = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in rows[1:])
            out.append(f"<table><tr>{head}</tr>{body}</table>")
            continue
        if line.startswith("- "):
            items = []
            while i < len(lines) and lines[i].strip().startswith("- "):
                items.append(f"<li>{_inline(lines[i].strip()[2:])}</li>")
                i += 1
            out.append(f"<ul>{''.join(items)}</ul>")
            continue
        if line.startswith("#"):
            level = min(6, 2 + len(line) - len(line.lstrip("#")))
            out.append(f"<h{level}>{_inline(line.lstrip('#').strip())}</h{level}>")
        elif line:
            out.append(f"<p>{_inline(line)}</p>")
        i += 1
    return "".join(out)


def _videos(videos: list[tuple[str, Path | str]]) -> str:
    """Each policy's recorded episode (an inline GIF), or the one line saying why there is none."""
    parts = []
    for label, video in videos:
        if isinstance(video, Path):
            encoded = base64.b64encode(video.read_bytes()).decode()
            parts.append(
                f'<figure><img alt="{html.escape(label)} episode" src="data:image/gif;base64,{encoded}">'
                f"<figcaption>{html.escape(label)}</figcaption></figure>"
            )
        else:
            parts.append(f"<p>{html.escape(label)}: no video ({html.escape(video)})</p>")
    return "".join(parts)


@dataclass
class Branch:
    """One line of the pipeline (a task and its techniques): its runs, decisions and PEFT table."""

    title: str
    runs: list[RunInput]
    decisions: list[str] = field(default_factory=list)
    peft_dir: Path | None = None
    videos: list[tuple[str, Path | str]] = field(default_factory=list)  # caption, GIF or why there is none
    race: str = ""  # the race before this branch's training (frugalrl.race's table), as markdown

    def peft_summary(self) -> dict[str, Any] | None:
        path = self.peft_dir / "summary.json" if self.peft_dir is not None else None
        return json.loads(path.read_text()) if path is not None and path.is_file() else None


def _claims(branch: Branch) -> str:
    rows = claim_rows([run_summary(run.directory) for run in branch.runs], branch.peft_summary())
    if not rows:
        return ""
    note = ("<p>One run at the demo's budget, beside the seed document's figure; the benchmarks and "
            "their verdicts are in docs/benchmarks.md (claims ledger).</p>")  # fmt: skip
    return "<h3>Claims and this run</h3>" + note + _table(["source", "claim", "claimed", "this run"], rows)


def _branch(branch: Branch) -> str:
    parts = [f"<section><h2>{html.escape(branch.title)}</h2>"]
    if branch.videos:
        parts.append(_videos(branch.videos))
    if branch.race:
        parts += ["<h3>Race: which technique this branch trains</h3>", _markdown(branch.race)]
    if branch.decisions:
        parts += ["<h3>Promotion</h3>", *[_markdown(d) for d in branch.decisions]]
    curved = [run for run in branch.runs if run.curve()[0]]
    if curved:
        caption = ("<p>At each update, the mean return of the last 100 training episodes as the learner "
                   "collected them (real episodes only): the sampling policy, exploring. The evaluations below "
                   "play the deterministic policy instead, so they usually score higher.</p>")  # fmt: skip
        parts += ["<h3>Learning curve (training episodes)</h3>", caption, _curves(curved)]
    if branch.runs:
        parts += ["<h3>Cost per stage</h3>", _cost(branch.runs)]
        quality = _world_model(branch.runs)
        if quality:
            parts += ["<h3>World model against real play</h3>", quality]
    if branch.peft_dir is not None and (branch.peft_dir / "peft_table.md").is_file():
        parts += ["<h3>PEFT comparison</h3>", _markdown((branch.peft_dir / "peft_table.md").read_text())]
        plot = branch.peft_dir / "peft_plot.png"
        if plot.is_file():
            parts.append(f'<img alt="peft" src="data:image/png;base64,{base64.b64encode(plot.read_bytes()).decode()}">')
    parts.append(_claims(branch))
    for image in (p for run in branch.runs for p in sorted(run.directory.glob("*.png")) if "latent" in p.name):
        encoded = base64.b64encode(image.read_bytes()).decode()
        parts += [
            f"<h3>{html.escape(image.stem)}</h3>",
            f'<img alt="{image.stem}" src="data:image/png;base64,{encoded}">',
        ]
    return "".join(parts) + "</section>"


def build_report(
    branches: list[Branch], baseline: RunInput | None = None, title: str = "frugalrl pipeline report"
) -> str:
    """The report's HTML: per branch its policies playing, promotion, curve, cost, PEFT table, claims."""
    parts = [f"<h1>{html.escape(title)}</h1>", *[_branch(b) for b in branches]]
    runs = [run for b in branches for run in b.runs]
    if baseline is not None and runs:
        parts += [f"<h2>Technique vs baseline ({html.escape(baseline.label)})</h2>", _ratios(runs, baseline)]
    style = (
        "body{font-family:sans-serif;max-width:1000px;margin:2em auto}td,th{border:1px solid #ccc;padding:4px 8px}"
        "table{border-collapse:collapse;margin:1em 0;display:block;overflow-x:auto;font-size:0.9em}"
        "img{max-width:100%}figure{display:inline-block;margin:0 1em 1em 0}"
        "section{border-top:2px solid #444;margin-top:2em}"
    )
    return f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>" \
           f"<style>{style}</style></head><body>{''.join(parts)}</body></html>\n"  # fmt: skip
