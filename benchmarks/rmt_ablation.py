"""RMT parts as an ablation: plain DQN/SAC, each part alone, all parts; frugalrl PPO and SB3 as peers.

Per env and seed, every variant is a fresh ``frugalrl train`` subprocess (MLflow off, one torch
thread) from the env's RMT config with parts switched by ``--set``:

    plain        every part off (uniform replay, no meta-controller, epsilon-greedy, plain MLP)
    +replay      hot/warm/cold tiered replay only
    +per         proportional prioritized replay (sum tree, Schaul et al. 2016) only: the field's reference
    +meta        the meta-controller only
    +explore     Boltzmann exploration only (DQN)
    +fractal     fractal residual blocks only
    all          every part on (the config as shipped, plus tiered replay, which it has off)

Peers in the same run: Stable-Baselines3 DQN/SAC with the same hyperparameters, and frugalrl PPO
with RL Zoo settings where a PPO config exists. Reported per env: median (min-max) final eval
return (20 deterministic episodes, fixed seeds), env steps until the mean training return first
reaches the target (LunarLander 200, Pendulum -200; "-" if never), training FLOPs and wall-clock
against plain, and the share of replay draws from the top-10% |TD error| transitions.

    python -m benchmarks.rmt_ablation --envs Pendulum-v1 --seeds 3 --workers 2 --write

The reuse and meta-controller claims are tested as effects, at a budget where the baseline has not
reached its ceiling (every variant has the same env steps and, since the variants share ``train_freq``
and ``gradient_steps``, the same gradient steps; the table shows both)::

    python -m benchmarks.rmt_ablation --envs LunarLander-v3 --steps 100000 --seeds 5 \
        --variants plain +replay +meta --no-peers --workers 2 --write

Tiered replay after its fix, against uniform and prioritized replay, reusing the uniform rows of an
earlier batch where a rerun reproduces them (runs are deterministic; ``--reuse`` below)::

    python -m benchmarks.rmt_ablation --envs LunarLander-v3 --steps 100000 --seeds 5 \
        --variants plain +replay +per --no-peers --workers 1 --reuse 20261201T060030Z-5397

Every run appends one row to ``benchmarks/results/rmt_ablation.jsonl`` (commit, config hash, command,
load average before and after, CPU-seconds); ``--report-only`` renders the newest batch of every env from
that file, with the rows it reuses, and then the newest batch of every variant that batch lacks.

``--reuse BATCH``: a variant that BATCH has is run on the first seed; if that row reproduces BATCH's row of
the same seed exactly (config hash, gradient steps, eval return, mean training return), its other seeds are
not run again and the report takes them from BATCH; if not, every seed is run.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from . import _harness, _report
from ._rmt import REPRODUCED, comparison, select

ENVS = {
    "LunarLander-v3": {"config": "lunarlander-rmt.yaml", "target": 200.0, "ppo": "lunarlander-ppo.yaml"},
    "Pendulum-v1": {"config": "pendulum-sac.yaml", "target": -200.0, "ppo": None},
    "BipedalWalker-v3": {"config": "bipedalwalker-rmt.yaml", "target": 300.0, "ppo": None},
}
OFF = ["replay.kind=uniform", "meta.kind=fixed", "dqn.exploration=epsilon", "policy.block=plain",
       "score_stages.stages=[]"]  # fmt: skip
PARTS = {
    "plain": [],
    "+replay": ["replay.kind=tiered"],
    "+per": ["replay.kind=prioritized"],
    "+meta": ["meta.kind=rmt"],
    "+explore": ["dqn.exploration=boltzmann"],
    "+fractal": ["policy.block=fractal"],
    "all": ["replay.kind=tiered", "meta.kind=rmt", "dqn.exploration=boltzmann", "policy.block=fractal"],
}
RESULTS = _report.RESULTS_DIR / "rmt_ablation.jsonl"


def variant_overrides(variant: str) -> list[str]:
    """``OFF`` and the variant's parts; a key a part sets is left out of ``OFF``, so a part the config has on
    keeps the config's own settings (``--set meta.kind=fixed`` then ``meta.kind=rmt`` would drop its
    ``meta.settings`` for the defaults)."""
    switched_on = {part.split("=", 1)[0] for part in PARTS[variant]}
    return [*(o for o in OFF if o.split("=", 1)[0] not in switched_on), *PARTS[variant]]


def run_frugalrl(config: Path, overrides: list[str], workdir: Path, target: float) -> dict:
    load_before = _report.load_average()
    run = _harness.train(config, Path(tempfile.mkdtemp(dir=workdir)) / "run", overrides)
    # (``mean_train_return`` below is the mean over every update of the mean return of the last 100 training
    # episodes: updates are evenly spaced in env steps, so it is the area under the learning curve / steps.)
    summary = run.summary
    returns = [r["episode_return"] for r in run.metrics() if r.get("episode_return") is not None]
    reached = _harness.first_reaching(run.out, target)
    return {
        "eval_mean": summary["eval_mean"],
        "config_hash": summary["config_hash"],
        "real_env_steps": summary["real_env_steps"],
        "optimizer_steps": summary["optimizer_steps"],
        # Sample efficiency: the mean training return over the whole run (area under the learning curve).
        "mean_train_return": sum(returns) / len(returns) if returns else None,
        "train_flops": summary["train_flops"],
        "train_s": summary["wall_s"] - summary["eval_s"],
        "cpu_s": run.cpu_s,  # user + system of the whole process (training and evaluation)
        "steps_to_target": int(reached["step"]) if reached else None,
        "top10_share": summary.get("replay_top10_share"),
        # tiered replay's tier sizes at the end of the run (None for the other stores): a collapsed tier shows
        "tier_sizes": {t: summary.get(f"replay_{t}_size") for t in ("hot", "warm", "cold")}
        if "replay_hot_size" in summary
        else None,
        "load_before": load_before,
    }


def run_sb3(config_path: Path, seed: int, overrides: list[str], episodes: int = 20) -> dict:
    """SB3 DQN or SAC with the config's hyperparameters, evaluated on frugalrl's evaluation seeds."""
    import time

    import gymnasium as gym
    import numpy as np
    import torch
    from stable_baselines3 import DQN, SAC

    from frugalrl.config import load_config

    torch.set_num_threads(1)
    config = load_config(config_path, [f"seed={seed}", *overrides])
    net = {"net_arch": list(config.policy.hidden)}
    started = time.perf_counter()
    if config.algo == "dqn":
        h = config.dqn
        model = DQN("MlpPolicy", config.env.id, learning_rate=h.learning_rate, batch_size=h.batch_size,
                    buffer_size=config.replay.capacity, learning_starts=h.learning_starts, gamma=h.gamma,
                    target_update_interval=h.target_update_interval, train_freq=h.train_freq,
                    gradient_steps=h.gradient_steps, exploration_fraction=h.exploration_fraction,
                    exploration_final_eps=h.exploration_final_eps, policy_kwargs=net, seed=seed,
                    device="cpu")  # fmt: skip
        total = h.total_timesteps
    else:
        h = config.sac
        model = SAC("MlpPolicy", config.env.id, learning_rate=h.learning_rate, batch_size=h.batch_size,
                    buffer_size=config.replay.capacity, learning_starts=h.learning_starts, gamma=h.gamma, tau=h.tau,
                    train_freq=h.train_freq, gradient_steps=h.gradient_steps, policy_kwargs=net, seed=seed,
                    device="cpu")  # fmt: skip
        total = h.total_timesteps
    model.learn(total)
    train_s = time.perf_counter() - started
    env = gym.make(config.env.id)
    returns = _harness.episode_returns(env, lambda obs: model.predict(obs, deterministic=True)[0], episodes,
                                       config.eval.seed)  # fmt: skip
    return {"eval_mean": float(np.mean(returns)), "train_flops": None, "train_s": train_s,
            "steps_to_target": None, "top10_share": None, "load_before": None}  # fmt: skip


def run_chain(env_id: str, seed: int, args: argparse.Namespace, results: list, workdir: Path) -> None:
    spec = ENVS[env_id]
    config = _report.REPO_ROOT / "configs" / spec["config"]
    discrete = env_id == "LunarLander-v3"
    scale = [f"{'dqn' if discrete else 'sac'}.total_timesteps={args.steps}"] if args.steps else []
    variants = [v for v in args.variants if discrete or v != "+explore"]
    kept = {(r["variant"], r["seed"]): r for r in args.reused_rows if r["env_id"] == env_id}
    done = {(r["variant"], r["seed"]) for r in args.continued_rows if r["env_id"] == env_id}
    for variant in variants:  # one seed's chain: the variants in turn (A B C ...)
        if (variant, seed) in done:
            print(f"{env_id:<16} seed {seed}  {variant:<13} already in batch {args.part_of}")
            continue
        reproduced = args.reproduced.get((env_id, variant))
        if (variant, seed) in kept and reproduced:
            print(f"{env_id:<16} seed {seed}  {variant:<13} reused from batch {kept[(variant, seed)]['batch']}")
            continue
        overrides = [f"seed={seed}", *scale, *variant_overrides(variant)]
        if not discrete:
            overrides = [o for o in overrides if not o.startswith("dqn.")]
        row = run_frugalrl(config, overrides, workdir, spec["target"])
        row = _record(args, results, {"env_id": env_id, "seed": seed, "variant": variant, **row})
        if (variant, seed) in kept:  # a rerun of a kept row: does it give the same figures?
            same = _report.reproduces(row, kept[(variant, seed)], REPRODUCED)
            args.reproduced[(env_id, variant)] = same and reproduced is not False
            print(
                f"{env_id:<16} seed {seed}  {variant:<13} {'reproduces' if same else 'does not reproduce'} "
                f"batch {kept[(variant, seed)]['batch']}"
            )
    if args.no_peers:
        return
    sb3_overrides = [*scale]
    _record(args, results, {"env_id": env_id, "seed": seed, "variant": "SB3", **run_sb3(config, seed, sb3_overrides)})
    if spec["ppo"]:
        ppo = _report.REPO_ROOT / "configs" / spec["ppo"]
        ppo_scale = [f"ppo.total_timesteps={args.steps}"] if args.steps else []
        row = run_frugalrl(ppo, [f"seed={seed}", *ppo_scale], workdir, spec["target"])
        _record(args, results, {"env_id": env_id, "seed": seed, "variant": "frugalrl PPO", **row})


def _record(args: argparse.Namespace, results: list, row: dict) -> dict:
    row = _harness.record(args.results, _report.stamp(args.common, **row),
                          f"{row['env_id']:<16} seed {row['seed']}  {row['variant']:<13} eval {row['eval_mean']:8.1f}  "
                          f"to target {row['steps_to_target']}  train_s {row['train_s']:7.1f}")  # fmt: skip
    results.append(row)
    return row


def _against_plain(by: dict, variant: str, seeds: list[int], key: str) -> list[tuple[float, float]]:
    """(variant, plain) values of ``key`` for every seed both have one for."""
    mine, plain = ({s: by[(v, s)].get(key) for s in seeds if (v, s) in by} for v in (variant, "plain"))
    return _report.pair_up(mine, plain)


def _vs_plain(by: dict, variant: str, seeds: list[int], key: str) -> str:
    """``difference of medians / median of per-seed differences`` of ``key`` against plain."""
    pairs = _against_plain(by, variant, seeds, key)
    if not pairs or variant == "plain":
        return "-"
    diff = _report.paired_difference(pairs)
    better = sum(d > 0 for d in diff.per_seed)
    return f"{diff.of_medians:+.1f} / {diff.median:+.1f} ({better} of {len(pairs)} seeds higher)"


def _ratio(by: dict, variant: str, seeds: list[int], key: str) -> str:
    """``ratio of medians / median of per-seed ratios`` of ``key`` against plain (a 0 is no figure)."""
    pairs = [(a, b) for a, b in _against_plain(by, variant, seeds, key) if a and b]
    return _report.paired_ratio(pairs).text() if pairs else "-"


def _reuse_line(rows: list[dict], head: str) -> str | None:
    """Which rows of a table come from a batch other than its head batch, and the rerun that allows it."""
    lent = [r for r in rows if comparison(r) != head]
    if not lent:
        return None
    parts = []
    for batch in dict.fromkeys(r["batch"] for r in lent):
        for variant in dict.fromkeys(r["variant"] for r in lent if r["batch"] == batch):
            seeds = [r["seed"] for r in lent if r["batch"] == batch and r["variant"] == variant]
            parts.append(f"{variant} seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))} from batch "
                         f"`{batch}`")  # fmt: skip
    return ("- reused rows (runs are deterministic; a kept row stands in only for a variant one of whose rows a "
            f"rerun reproduced exactly: config hash, gradient steps, eval return, mean training return): "
            f"{'; '.join(parts)}")  # fmt: skip


def _per_seed(by: dict, variants: list[str], seeds: list[int]) -> str:
    """Eval return and mean training return of every variant, seed by seed; CPU-seconds where kept."""
    header = ["seed", *(f"{v}: eval / mean training return / CPU-s" for v in variants)]
    table = []
    for seed in seeds:
        cells = [str(seed)]
        for v in variants:
            r = by.get((v, seed))
            cpu = f"{r['cpu_s']:,.0f}" if r and r.get("cpu_s") is not None else "-"
            cells.append(f"{r['eval_mean']:.1f} / {r['mean_train_return']:.1f} / {cpu}" if r else "-")
        table.append(cells)
    return _report.markdown_table(header, table)


def _target(
    by: dict, seeds: list[int], variant: str = "+replay", reference: str = "+per", needed: int = 5
) -> str | None:
    """Issue 33's bar for tiered replay: on none of ``needed`` seeds worse than uniform by more than uniform's
    seed-to-seed spread (its sample standard deviation over the seeds), on eval return and on mean training
    return; and a median mean training return at least prioritized replay's. Undecided on fewer seeds."""
    paired = [s for s in seeds if (variant, s) in by and ("plain", s) in by]
    if not paired:
        return None
    lines = []
    for key, name in (("eval_mean", "eval return"), ("mean_train_return", "mean training return")):
        diffs = [by[(variant, s)][key] - by[("plain", s)][key] for s in paired]
        text = f"{name}: {variant} - plain per seed {', '.join(f'{d:+.1f}' for d in diffs)}"
        if len(paired) >= 2:
            spread = statistics.stdev(by[("plain", s)][key] for s in paired)
            worse = [s for s, d in zip(paired, diffs, strict=True) if d < -spread]
            which = f" (seed {', '.join(map(str, worse))})" if worse else ""
            text += (f"; plain's seed-to-seed spread (SD) {spread:.1f}; worse by more than it on {len(worse)} of "
                     f"{len(paired)} seeds{which}")  # fmt: skip
        lines.append(text)
    ref = [by[(reference, s)]["mean_train_return"] for s in seeds if (reference, s) in by]
    mine = [by[(variant, s)]["mean_train_return"] for s in paired]
    if ref:
        met = statistics.median(mine) >= statistics.median(ref)
        lines.append(f"median mean training return: {variant} {statistics.median(mine):.1f}, {reference} "
                     f"{statistics.median(ref):.1f} ({len(ref)} seeds): {'at least' if met else 'below'} "
                     f"{reference}'s")  # fmt: skip
    done = "" if len(paired) >= needed else f"not decided, {len(paired)} of the {needed} seeds it needs measured; "
    return (
        "- against the bar (issue 33: not worse than plain by more than the spread on any seed, area at least "
        f"prioritized's): {done}" + "; ".join(lines)
    )


def report(results: list[dict], results_path: Path = RESULTS) -> str:
    """The section for ``results`` (rows as ``select`` picks them, or one run's): per env and table (the head
    batch in ``shown_in``, else the batch), its facts, one summary table and the figures seed by seed."""
    parts = [
        "Every frugalrl variant starts from the env's RMT config with all parts off, then switches on the named "
        "part(s); SB3 uses the same hyperparameters. Differences and ratios against plain are given as "
        '*of medians / median of per-seed* figures. "mean training return" is the mean, over every update of '
        "the run, of the mean return of the last 100 training episodes; updates are evenly spaced in env steps, "
        "so it is the area under the learning curve divided by the steps, a sample-efficiency measure. "
        "Every variant of a table has the same env steps and gradient steps (columns 3 and 4). "
        "+replay is tiered replay as the code stood at the table's commit: at commit 5172084 its tier thresholds "
        "were quantiles of the drawn |TD errors| and the hot tier collapsed to a few transitions; later, "
        "quantiles of the stored transitions' (docs/offpolicy.md)."
    ]
    for env_id in dict.fromkeys(r["env_id"] for r in results):
        env_rows = [r for r in results if r["env_id"] == env_id]
        heads = list(dict.fromkeys(r.get("shown_in", r["batch"]) for r in env_rows))
        for head in heads:
            rows = [r for r in env_rows if r.get("shown_in", r["batch"]) == head]
            parts.append(_table(env_id, rows, head, results_path, first=head == heads[0]))
    return "\n\n".join(parts)


def _table(env_id: str, rows: list[dict], head: str, results_path: Path, first: bool) -> str:
    by = {(r["variant"], r["seed"]): r for r in rows}
    seeds = sorted({r["seed"] for r in rows})
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    table = []
    for variant in variants:
        mine = [by[(variant, s)] for s in seeds if (variant, s) in by]
        reached = [r["steps_to_target"] for r in mine if r["steps_to_target"] is not None]
        shares = [r["top10_share"] for r in mine if r["top10_share"] is not None]
        steps = sorted({r.get("real_env_steps") for r in mine} - {None})
        grads = sorted({r.get("optimizer_steps") for r in mine} - {None})
        curve = [r["mean_train_return"] for r in mine if r.get("mean_train_return") is not None]
        table.append([
            variant, len(mine), "/".join(f"{v:,}" for v in steps) or "-", "/".join(f"{v:,}" for v in grads) or "-",
            _report.fmt_mmm([r["eval_mean"] for r in mine], "{:.1f}"), _vs_plain(by, variant, seeds, "eval_mean"),
            _report.fmt_mmm(curve, "{:.1f}") if curve else "-", _vs_plain(by, variant, seeds, "mean_train_return"),
            f"{len(reached)}/{len(mine)}" + (f", median {statistics.median(reached):,.0f}" if reached else ""),
            _ratio(by, variant, seeds, "train_flops"), _ratio(by, variant, seeds, "train_s"),
            f"{statistics.median(shares):.3f}" if shares else "-",
        ])  # fmt: skip
    header = ["variant", "seeds", "env steps", "gradient steps", "eval return", "eval vs plain",
              "mean training return", "training return vs plain", "reached target (steps)", "FLOPs / plain",
              "time / plain", "top-10% TD share of draws"]  # fmt: skip
    facts = _report.rows_lines(rows, results_path)
    facts += [line for line in (_reuse_line(rows, head), _target(by, seeds)) if line]
    title = f"**{env_id}** (target {ENVS[env_id]['target']:g})" + ("" if first else f", batch `{head}`")
    tables = _report.markdown_table(header, table)
    if any(r.get("cpu_s") is not None for r in rows) or "+per" in variants:
        tables += "\n\n" + _per_seed(by, variants, seeds)
    return f"{title}\n\n" + "\n".join(facts) + "\n\n" + tables


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["Pendulum-v1"], choices=list(ENVS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=1, help="seeds run first-seed .. first-seed + seeds - 1")
    parser.add_argument("--variants", nargs="+", default=list(PARTS), choices=list(PARTS))
    parser.add_argument("--no-peers", action="store_true", help="skip SB3 and frugalrl PPO")
    parser.add_argument("--steps", type=int, default=None, help="override every env's budget")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--reuse", nargs="*", default=[], metavar="BATCH",
                        help="kept batches whose rows stand in for a variant once a rerun reproduces one")  # fmt: skip
    parser.add_argument("--part-of", default=None, metavar="BATCH",
                        help="continue the comparison BATCH began (one table; runs it has are skipped)")  # fmt: skip
    _report.add_output_args(parser, "rmt_ablation")
    args = parser.parse_args()

    def run(args: argparse.Namespace) -> list[dict]:
        args.common = _report.batch_common(reuses=args.reuse, part_of=args.part_of)
        kept = _report.read_rows(args.results)
        args.reused_rows = [r for r in kept if r.get("batch") in args.reuse]
        args.continued_rows = [r for r in kept if args.part_of and comparison(r) == args.part_of]
        # A variant two reused batches already agree on (a rerun kept by an earlier invocation) is reproduced.
        same_run = ("env_id", "variant", "seed")
        args.reproduced = {
            (a["env_id"], a["variant"]): True for a in args.reused_rows for b in args.reused_rows
            if a["batch"] != b["batch"] and all(a[k] == b[k] for k in same_run) and _report.reproduces(a, b, REPRODUCED)
        }  # fmt: skip
        results: list[dict] = []
        chains = [(env, seed) for seed in range(args.first_seed, args.first_seed + args.seeds) for env in args.envs]
        with tempfile.TemporaryDirectory() as workdir:
            _harness.parallel(lambda chain: run_chain(*chain, args, results, Path(workdir)), chains, args.workers)
        return results

    _report.run_or_render("rmt_ablation", args, run, report, select)


if __name__ == "__main__":
    main()
