"""Can the frozen latent tell when a reward comes? Why the world model's reward head ranked at chance.

    python -m benchmarks.reward_predictability --encoder runs/encoders/encoder --write

On the random-play frames a shared encoder was trained on (``dataset-<game>.npz`` beside its
``encoder.pt``), whether step t brings a nonzero reward is predicted from what the step starts with,
fitted on games 0-5 of the dataset and scored (ROC AUC, 0.5 = chance) on the two held-out games 6-7:

- ``RAM + action``: the console's 128 bytes, boosted trees (scikit-learn's histogram gradient boosting):
  whether the game state decides the reward at all;
- ``latent + action (trees)``: the encoder's latent, the same trees (scale-free): whether the latent
  keeps what decides it;
- ``head as saved``: the world model's reward head in the encoder file;
- ``head, raw input`` / ``head, standardised``: a fresh world model (``frugalrl.latent.world_model``,
  the same width and loss) trained ``--head-steps`` steps on the same latents, once with its latent
  statistics held at mean 0 and variance 1 (the model before 2026-12-05) and once with them tracked.

Each head also imagines 16 steps open-loop from every held-out start whose 16 real steps stay in one
episode, with the recorded actions: the expected reward events (each step weighted by the probability
that the imagined episode still goes on, as the world-model gate counts them, and unweighted) against
the real ones, and the imagined 16-step survival against the real one ((1 - end rate) ** 16).
Rows go to ``benchmarks/results/reward_predictability.jsonl``, one per game.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
import torch

from frugalrl.latent.dataset import FrameDataset, load_dataset
from frugalrl.latent.encoder import encode
from frugalrl.latent.quality import roc_auc
from frugalrl.latent.store import LatentModels, load_latent_file
from frugalrl.latent.world_model import LatentWorldModel

from . import _harness, _report

HORIZON = 16
TRAIN_GAMES, TEST_GAMES = list(range(6)), [6, 7]


class RawInputWorldModel(LatentWorldModel):
    """The model as it was before its latent statistics: they stay at mean 0, variance 1."""

    def _track_latents(self, latent: torch.Tensor) -> None:
        pass


def _latents(models: LatentModels, data: FrameDataset) -> torch.Tensor:
    games, steps = data.actions.shape
    g, t = (a.ravel() for a in np.meshgrid(np.arange(games), np.arange(steps), indexing="ij"))
    stack = int(data.meta["stack"])
    with torch.no_grad():
        chunks = [encode(models.encoder, torch.as_tensor(data.stacked(g[i : i + 2000], t[i : i + 2000], stack)))
                  for i in range(0, len(g), 2000)]  # fmt: skip
    return torch.cat(chunks).reshape(games, steps, -1)


def _trees_auc(x: np.ndarray, y: np.ndarray, train: np.ndarray, seed: int) -> float:
    from sklearn.ensemble import HistGradientBoostingClassifier

    model = HistGradientBoostingClassifier(max_iter=300, random_state=seed).fit(x[train], y[train])
    return roc_auc(torch.as_tensor(model.predict_proba(x[~train])[:, 1]), torch.as_tensor(y[~train]))


def _head_figures(wm: LatentWorldModel, z: torch.Tensor, data: FrameDataset) -> dict[str, float | None]:
    """Held-out AUC of the head's calibrated event probability; imagined (each step weighted by the imagined
    episode's survival, and unweighted) against real events over 16 steps; imagined and real 16-step survival."""
    actions, rewards = torch.as_tensor(data.actions), torch.as_tensor(data.rewards)
    ends = torch.as_tensor(data.terminated | data.truncated)
    with torch.no_grad():
        zs, a = z[TEST_GAMES, :-1].reshape(-1, z.shape[-1]), actions[TEST_GAMES, :-1].reshape(-1)
        p_event = 1 - wm.reward_probs(wm(zs, a))[:, 1]
        auc = roc_auc(p_event, rewards[TEST_GAMES, :-1].reshape(-1) != 0)
        imagined = unweighted = survival = real = starts_n = 0.0
        for g in TEST_GAMES:
            starts = [s for s in range(0, z.shape[1] - HORIZON - 1) if not bool(ends[g, s : s + HORIZON].any())]
            s = torch.as_tensor(starts)
            latent, alive, events, plain = z[g, s], torch.ones(len(s)), torch.zeros(len(s)), torch.zeros(len(s))
            for k in range(HORIZON):
                pred = wm(latent, actions[g, s + k])
                p_step = 1 - wm.reward_probs(pred)[:, 1]
                events, plain = events + p_step * alive, plain + p_step
                alive = alive * (1 - wm.done_prob(pred))
                latent = pred.next_latent
            imagined, unweighted, survival = (
                imagined + float(events.sum()),
                unweighted + float(plain.sum()),
                survival + float(alive.sum()),
            )
            real += float(sum((rewards[g, s + k] != 0).float() for k in range(HORIZON)).sum())
            starts_n += len(s)
    end_rate = float(ends[TEST_GAMES, :-1].float().mean())
    return {"auc": auc, "imagined_events": imagined / starts_n, "real_events": real / starts_n,
            "imagined_events_unweighted": unweighted / starts_n, "imagined_survival": survival / starts_n,
            "real_survival": (1 - end_rate) ** HORIZON}  # fmt: skip


def _fit_head(cls: type[LatentWorldModel], z: torch.Tensor, data: FrameDataset, steps: int, seed: int,
              spec: dict) -> LatentWorldModel:  # fmt: skip
    torch.manual_seed(seed)
    wm = cls(spec["latent_dim"], spec["num_actions"], spec["hidden"])
    optimizer = torch.optim.Adam(wm.parameters(), lr=1e-3)
    zt, zn = z[TRAIN_GAMES, :-1].reshape(-1, z.shape[-1]), z[TRAIN_GAMES, 1:].reshape(-1, z.shape[-1])
    a = torch.as_tensor(data.actions)[TRAIN_GAMES, :-1].reshape(-1)
    r = torch.as_tensor(data.rewards)[TRAIN_GAMES, :-1].reshape(-1)
    d = torch.as_tensor(data.terminated | data.truncated)[TRAIN_GAMES, :-1].reshape(-1)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        i = torch.randint(0, len(zt), (256,), generator=gen)
        loss, _ = wm.loss(zt[i], a[i], zn[i], r[i], d[i])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return wm


def _measure(game_file: Path, args: argparse.Namespace) -> dict:
    torch.set_num_threads(1)
    models = load_latent_file(Path(args.encoder) / "encoder.pt")
    data = load_dataset(game_file)
    game = data.meta["env_id"]
    models.for_game(game)
    z = _latents(models, data)
    games, steps = data.actions.shape
    g, t = (x.ravel() for x in np.meshgrid(np.arange(games), np.arange(steps - 1), indexing="ij"))
    y = (data.rewards[g, t] != 0).astype(int)
    onehot = np.eye(models.world_model.num_actions, dtype=np.float32)[data.actions[g, t]]
    train = g < len(TRAIN_GAMES)
    row = {"game": game, "steps": int(len(y)), "reward_events": int(y.sum()), "heldout_events": int(y[~train].sum()),
           "latent_spread": float(z.reshape(-1, z.shape[-1]).std(0).mean()),
           "auc_ram_action": _trees_auc(np.hstack([data.ram[g, t].astype(np.float32), onehot]), y, train, args.seed),
           "auc_latent_action_trees": _trees_auc(np.hstack([z[g, t].numpy(), onehot]), y, train, args.seed),
           }  # fmt: skip
    heads = {"saved": models.world_model}
    spec = models.world_model.spec()
    for name, cls in (("raw", RawInputWorldModel), ("standardised", LatentWorldModel)):
        heads[name] = _fit_head(cls, z, data, args.head_steps, args.seed, spec)
    for name, wm in heads.items():
        row |= {f"{name}_{k}": v for k, v in _head_figures(wm, z, data).items()}
    return row


def run(args: argparse.Namespace) -> list[dict]:
    encoder = Path(args.encoder)
    files = sorted(encoder.glob("dataset-*.npz"))
    common = _report.batch_common(encoder=args.encoder, encoder_sha256=_report.file_sha256(encoder / "encoder.pt"),
                                  head_steps=args.head_steps, seed=args.seed)  # fmt: skip

    def line(row: dict) -> str:
        return (f"{row['game']}: AUC RAM {row['auc_ram_action']:.3f}, latent trees "
                f"{row['auc_latent_action_trees']:.3f}, head raw {row['raw_auc']:.3f}, "
                f"standardised {row['standardised_auc']:.3f}")  # fmt: skip

    return _harness.measure(files, lambda path: _measure(path, args), args.results, common, line)


def render(rows: list[dict], results: Path) -> str:
    def ratio(r: dict, head: str) -> str:
        line = f"{r[f'{head}_imagined_events']:.3f} / {r[f'{head}_real_events']:.3f}"
        if f"{head}_imagined_events_unweighted" in r:  # rows before these figures were kept lack them
            line += (f" (unweighted {r[f'{head}_imagined_events_unweighted']:.3f}; survival "
                     f"{r[f'{head}_imagined_survival']:.2f} vs {r[f'{head}_real_survival']:.2f})")  # fmt: skip
        return line

    table = [[r["game"], f"{r['reward_events']:,} ({r['heldout_events']})", f"{r['latent_spread']:.3f}",
              f"{r['auc_ram_action']:.3f}", f"{r['auc_latent_action_trees']:.3f}", f"{r['saved_auc']:.3f}",
              f"{r['raw_auc']:.3f}", f"{r['standardised_auc']:.3f}", ratio(r, "raw"), ratio(r, "standardised")]
             for r in rows]  # fmt: skip
    header = ["game", "reward events (held out)", "latent spread", "AUC: RAM + action", "AUC: latent + action (trees)",
              "AUC: head as saved", "AUC: head, raw input", "AUC: head, standardised",
              "events / 16 steps, raw: imagined / real", "standardised: imagined / real"]  # fmt: skip
    first = rows[0]
    return "\n".join([
        *_report.rows_lines(rows, results),
        f"- encoder `{_report.portable(first['encoder'])}` (build {first['encoder_sha256'][:12]}); trained on games "
        f"0-5 of each dataset, scored on games 6-7; heads: {first['head_steps']:,} steps of 256, seed {first['seed']}",
        "",
        _report.markdown_table(header, table),
    ])  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder", default="runs/encoders/encoder", help="a shared encoder directory")
    parser.add_argument("--head-steps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    _report.add_output_args(parser, "reward_predictability")
    args = parser.parse_args()
    if not args.report_only:
        if not (Path(args.encoder) / "encoder.pt").is_file():
            parser.error(
                f"--encoder {args.encoder}: no encoder.pt there; make it with "
                "python -m benchmarks.latent_vs_pixel --encoder-only"
            )
        args.encoder = os.path.abspath(args.encoder)  # rows name it repo-relative (_report.portable)
    _report.run_or_render("reward_predictability", args, run, render, after=["world_model_quality"])


if __name__ == "__main__":
    main()
