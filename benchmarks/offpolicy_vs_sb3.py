"""SAC and DQN: frugalrl against Stable-Baselines3 on Pendulum-v1, HalfCheetah-v5, CartPole-v1 and LunarLander-v3.

Both learners train the same algorithm with the same hyperparameters. frugalrl runs its config file;
the SB3 side is plain SB3 as a user runs it (``make_vec_env`` + ``SAC(...)``/``DQN(...)`` + ``.learn(n)``)
with the RL Zoo hyperparameters (rl-baselines3-zoo ``hyperparams/sac.yml`` and ``dqn.yml``) read from that
same YAML file:

* ``Pendulum-v1``    SAC  ``configs/pendulum-sac.yaml``     default budget 20k env steps, 5 seeds
* ``HalfCheetah-v5`` SAC  ``configs/halfcheetah-sac.yaml``  default budget 100k env steps, 3 seeds (the
  config trains 200k; RL Zoo's own budget is 1M)
* ``CartPole-v1``    DQN  ``configs/cartpole-dqn.yaml``     default budget 50k env steps, 5 seeds
* ``LunarLander-v3`` DQN  ``configs/lunarlander-dqn.yaml``  default budget 100k env steps, 5 seeds

Config -> SB3 (``sb3_settings``), both algorithms: ``env.num_envs`` -> ``make_vec_env(n_envs)``;
``replay.capacity`` -> ``buffer_size``; ``learning_rate``, ``batch_size``, ``learning_starts``, ``gamma``,
``tau``, ``train_freq``, ``gradient_steps`` by name; ``policy.hidden`` -> ``net_arch``, ``policy.activation``
-> ``activation_fn``; Adam with torch's default eps on both sides. SAC also: ``ent_coef`` and
``target_entropy`` by name (``auto``: SB3's ``"auto"``, the temperature starting at 1 on both sides).
DQN also: ``target_update_interval``, ``exploration_fraction``, ``exploration_initial_eps``,
``exploration_final_eps``, ``max_grad_norm`` by name. RL Zoo's LunarLander ``gradient_steps: -1`` (as many
gradient steps as env steps collected) is ``4`` in the config (``train_freq`` 4 x 1 env) and goes to SB3 as 4.
frugalrl-only implementation switches that leave the algorithm as it is (e.g. a fused Adam kernel) stay as the
config has them; each row keeps frugalrl's whole ``sac``/``dqn`` section under ``settings``.

frugalrl's DQN is Double DQN by default (``dqn.double: true``), SB3's DQN is not: the frugalrl side runs with
``--set dqn.double=false`` (the target network's max, as SB3), so both train the same algorithm.

Settings without an SB3 counterpart make the SB3 worker refuse to run (``ValueError``): env kwargs, frame
stacking, changed dynamics, observation or reward normalisation, custom env imports, CNN / fractal blocks /
adapters, orthogonal init (SB3's off-policy nets use PyTorch's default), a replay store other than plain
uniform, the meta-controller, score stages, sample selection, evaluations during training, a CPU budget,
Double DQN, Boltzmann exploration, SAC log-std bounds other than SB3's (-20, 2), a SAC activation other than
ReLU (frugalrl's SAC networks are ReLU whatever ``policy.activation`` says).

Differences that stay: before ``learning_starts`` SB3's DQN acts uniformly at random, frugalrl's DQN
epsilon-greedy as scheduled (epsilon starts at 1); learning starts at ``global_step >= learning_starts``
in frugalrl, ``> learning_starts`` in SB3 (one rollout apart at most); SB3 syncs DQN's target every
``target_update_interval`` env steps, frugalrl after the first learning phase that is that far on.

For every seed the script runs frugalrl, then SB3 (A B A B ...), each in a fresh subprocess with
``torch.set_num_threads(1)``, so no threads, caches or RNG state leak from one run to the next.

Timed figure ("training wall-clock"):

* frugalrl: wall-clock around ``train(cfg, out_dir)`` minus its final evaluation (``summary["eval_s"]``):
  building the env and learner, all env steps and gradient steps, checkpoint writes, exporting
  ``policy.pt``; MLflow tracking off. ``summary.json``'s time split is kept too: ``env_s``, ``act_s``,
  ``learn_s`` (replay sampling included), and every other ``*_s`` key it has; the table shows the rest of the
  training wall-clock as "other" (replay writes, the loop, construction, checkpoints, export).
* SB3: wall-clock around ``make_vec_env(env_id, n_envs, seed=seed)`` and ``SAC(...)``/``DQN(...)`` plus
  ``.learn(total_timesteps)``. ``.learn()`` alone is reported too.
* CPU-seconds: ``time.process_time()`` of the worker process (every thread) over the same region (frugalrl:
  minus its final evaluation's ``eval_cpu_s``).

Imports are not timed: both workers import ``torch._dynamo`` and the env's module (Box2D, MuJoCo) before the
clock starts.

Final return: deterministic episodes (Pendulum 20, HalfCheetah 10, CartPole 20, LunarLander 20), episode i
reset with seed 10000+i. frugalrl: ``summary["eval_mean"]`` (its evaluator does exactly that: SAC's tanh of
the mean action, DQN's greedy action); SB3: ``gym.make(env_id)``, ``reset(seed=10000+i)``,
``model.predict(obs, deterministic=True)`` until the episode ends. Gradient steps: frugalrl's
``gradient_updates`` (DQN) / ``optimizer_steps`` (SAC: one per gradient step) from ``summary.json``; SB3's
``model._n_updates``.

Targets, per env (``TIME_TARGET``, ``RETURN_RULE``): training wall-clock frugalrl / SB3 (the median of the
per-seed ratios; the ratio of medians is shown beside it) at most 0.7 for SAC and 0.5 for DQN; the return:
SAC's median eval return within SB3's seed-to-seed spread or above it (at least SB3's lowest seed), DQN's
median at least SB3's median. Beside the verdict, the paired difference of the eval returns (frugalrl - SB3,
mean over seeds, 95% bootstrap interval, from 3 pairs up): where that interval holds 0, these seeds do not
tell the two returns apart, whatever the medians say. The verdict is computed from the rows.

Every run appends one JSON row to ``benchmarks/results/offpolicy_vs_sb3.jsonl`` as soon as it ends (env, seed,
contender, figures, load average, timestamp, git commit, command line, a ``batch`` id shared by one
invocation). ``--resume`` continues the newest batch of each env at its budget: the (seed, contender) runs it
holds are skipped and the new rows join that batch. ``--report-only`` re-renders one section per env
(``offpolicy_vs_sb3_<env>``) from the newest batch of that file at the given budget without running
anything; ``--write`` puts the sections into ``docs/benchmarks.md``.

Run from the repository root, one env per command. Cost per run, each side, one core, as measured on this
project's 2-core host (2026-12-06): SAC Pendulum 20k about 3.6 minutes (frugalrl) and 4.3 (SB3), DQN CartPole
50k about 40 s and 46 s. SAC HalfCheetah 100k (about 20-30 minutes a run) and DQN LunarLander 100k (about 4-8
minutes) are estimates from 600-step smoke runs, not measured end to end::

    nohup python -m benchmarks.offpolicy_vs_sb3 --env Pendulum-v1 --write > /tmp/offpolicy_pendulum.log 2>&1 &
        # 5 seeds x 2: about 40 minutes
    nohup python -m benchmarks.offpolicy_vs_sb3 --env CartPole-v1 --write > /tmp/offpolicy_cartpole.log 2>&1 &
        # 5 seeds x 2: about 8 minutes
    nohup python -m benchmarks.offpolicy_vs_sb3 --env LunarLander-v3 --write > /tmp/offpolicy_lunar.log 2>&1 &
        # 5 seeds x 2: about 40-80 minutes (estimate)
    nohup python -m benchmarks.offpolicy_vs_sb3 --env HalfCheetah-v5 --write > /tmp/offpolicy_cheetah.log 2>&1 &
        # 3 seeds x 2: about 2-3 hours (estimate)
    python -m benchmarks.offpolicy_vs_sb3 --report-only --env Pendulum-v1 HalfCheetah-v5 CartPole-v1 LunarLander-v3
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from frugalrl.stats import paired_bootstrap

from . import _harness, _report, _sb3
from ._offpolicy import ENVS, EnvSpec, frugalrl_overrides, sb3_settings
from ._report import opt

NAME = "offpolicy_vs_sb3"  # the results file's name
CONTENDERS = ("frugalrl", "sb3")
SPLIT = ("env_s", "act_s", "learn_s")  # frugalrl's time split in the tables (the rest: "other")


# Where a section that docs/benchmarks.md does not have yet goes (after the first of these that it has).
SECTION_AFTER = {
    "offpolicy_vs_sb3_pendulum": ("ppo_vs_sb3_halfcheetah", "ppo_vs_sb3_lunarlander", "ppo_vs_sb3"),
    "offpolicy_vs_sb3_halfcheetah": ("offpolicy_vs_sb3_pendulum", "ppo_vs_sb3_halfcheetah"),
    "offpolicy_vs_sb3_cartpole": ("offpolicy_vs_sb3_halfcheetah", "offpolicy_vs_sb3_pendulum"),
    "offpolicy_vs_sb3_lunarlander": ("offpolicy_vs_sb3_cartpole", "offpolicy_vs_sb3_halfcheetah"),
}


# --------------------------------------------------------------------------- workers (one per subprocess)
def worker_frugalrl(spec: EnvSpec, seed: int, timesteps: int) -> dict:
    import torch

    torch.set_num_threads(1)
    _sb3.preimport(spec.env_id)
    from frugalrl.config import load_config
    from frugalrl.training import train

    overrides = frugalrl_overrides(spec, seed, timesteps)
    cfg = load_config(_report.REPO_ROOT / spec.config, overrides)
    with tempfile.TemporaryDirectory(prefix="frugalrl-bench-") as tmp:
        cpu_started, started = time.process_time(), time.perf_counter()
        summary = train(cfg, Path(tmp) / "run", interactive=False)
        total, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    return {
        "train_s": total - summary["eval_s"],
        "total_s": total,
        "learn_call_s": None,
        "train_cpu_s": cpu - summary.get("eval_cpu_s", 0.0),
        "time_split": {k: v for k, v in summary.items() if k.endswith("_s") and isinstance(v, int | float)},
        "gradient_steps": summary.get("gradient_updates", summary.get("optimizer_steps")),
        "updates": summary.get("updates"),
        "eval_mean": summary["eval_mean"],
        "eval_returns": summary.get("eval_returns"),
        "eval_episodes": summary.get("eval_episodes"),
        "env_steps": summary["real_env_steps"],
        "torch_threads": torch.get_num_threads(),
        "settings": {
            "config": spec.config,
            "overrides": overrides,
            spec.algo: cfg.algo_config.model_dump(mode="json"),
            "replay_capacity": cfg.replay.capacity,
        },
    }


def worker_sb3(spec: EnvSpec, seed: int, timesteps: int) -> dict:
    import torch

    torch.set_num_threads(1)
    _sb3.preimport(spec.env_id)
    import stable_baselines3
    from stable_baselines3.common.env_util import make_vec_env

    from frugalrl.config import load_config

    cfg = load_config(_report.REPO_ROOT / spec.config, frugalrl_overrides(spec, seed, timesteps))
    algo, kwargs, described = sb3_settings(cfg)
    learner = getattr(stable_baselines3, algo)

    cpu_started, started = time.process_time(), time.perf_counter()
    env = make_vec_env(spec.env_id, n_envs=cfg.env.num_envs, seed=seed)
    model = learner("MlpPolicy", env, seed=seed, device="cpu", **kwargs)
    learn_started = time.perf_counter()
    model.learn(timesteps)
    ended, cpu = time.perf_counter(), time.process_time() - cpu_started

    returns = _sb3.eval_returns(spec.env_id, lambda obs: model.predict(obs, deterministic=True)[0], spec.eval_episodes)
    env.close()
    return {
        "train_s": ended - started,
        "total_s": None,
        "learn_call_s": ended - learn_started,
        "train_cpu_s": cpu,
        "time_split": None,
        "gradient_steps": int(model._n_updates),
        "updates": None,
        "eval_mean": float(np.mean(returns)),
        "eval_returns": returns,
        "eval_episodes": len(returns),
        "env_steps": int(model.num_timesteps),
        "torch_threads": torch.get_num_threads(),
        "settings": {algo: "MlpPolicy", **described},
    }


# --------------------------------------------------------------------------- report
def other_s(row: dict) -> float | None:
    """frugalrl's training wall-clock outside env_s, act_s and learn_s (None where the split is not kept)."""
    split = row.get("time_split") or {}
    if any(split.get(k) is None for k in SPLIT):
        return None
    return row["train_s"] - sum(split[k] for k in SPLIT)


TIME_TARGET = {"sac": 0.7, "dqn": 0.5}  # training wall-clock frugalrl / SB3, median of per-seed ratios
RETURN_RULE = {
    "sac": "a median eval return within SB3's seed-to-seed spread or above (at least SB3's lowest seed)",
    "dqn": "a median eval return at least SB3's",
}


def return_met(algo: str, fr_ret: list[float], sb_ret: list[float]) -> bool:
    """The return half of the target (``RETURN_RULE``)."""
    floor = min(sb_ret) if algo == "sac" else statistics.median(sb_ret)
    return statistics.median(fr_ret) >= floor


def target_line(algo: str, clock: _report.Paired, fr_ret: list[float], sb_ret: list[float], budget_note: str) -> str:
    """The verdict against the issue's target for ``algo`` (``TIME_TARGET``, ``RETURN_RULE``), from the figures,
    with the paired return difference and its interval beside it."""
    goal_ratio = TIME_TARGET[algo]
    med = clock.median
    time_ok = med <= goal_ratio
    time_text = (
        f"training wall-clock frugalrl / SB3, median of per-seed ratios {med:.2f} (min {min(clock.per_seed):.2f}, "
        f"max {max(clock.per_seed):.2f}; ratio of medians {clock.of_medians:.2f}): {'met' if time_ok else 'missed'}"
    )
    if (clock.of_medians <= goal_ratio) != time_ok:
        time_text += f" (the ratio of medians alone would have {'met' if not time_ok else 'missed'} it)"
    fr_med, sb_med = statistics.median(fr_ret), statistics.median(sb_ret)
    ret_ok = return_met(algo, fr_ret, sb_ret)
    ret_text = (
        f"median eval return frugalrl {fr_med:.1f} vs SB3 {sb_med:.1f} (SB3 {min(sb_ret):.1f} to "
        f"{max(sb_ret):.1f}): {'met' if ret_ok else 'missed'}"
    )
    diff = np.asarray(fr_ret) - np.asarray(sb_ret)
    if len(diff) == 2:  # a bootstrap over two differences only ever resamples those two: no interval
        ret_text += f"; paired difference {diff.mean():+.1f} over 2 pairs: too few pairs for an interval"
    elif len(diff) > 2:
        low, high = paired_bootstrap(np.asarray(fr_ret), np.asarray(sb_ret), 0.95)
        apart = "these seeds do not tell the returns apart" if low <= 0 <= high else "the returns differ"
        ret_text += f"; paired difference {diff.mean():+.1f}, 95% interval [{low:+.1f}, {high:+.1f}]: {apart}"
    goal = (
        f"training wall-clock frugalrl / SB3 at most {goal_ratio} (median of per-seed ratios) with {RETURN_RULE[algo]}"
    )
    verdict = "met" if time_ok and ret_ok else "missed"
    return f"**Target: {goal}. Measured: {time_text}; {ret_text}. Overall: {verdict}.**{budget_note}"


def render(spec: EnvSpec, rows: list[dict], timesteps: int) -> str:
    results, incomplete = _report.by_seed(rows, CONTENDERS)
    if not results:
        ran = ", ".join(f"seed {r['seed']} {r['contender']}" for r in rows)
        return f"_{spec.env_id}: no seed with both contenders yet in batch `{rows[0]['batch']}` (runs kept: {ran})._"
    n = len(results)
    fr = [r["frugalrl"] for r in results]
    sb = [r["sb3"] for r in results]
    fr_t, sb_t = [r["train_s"] for r in fr], [r["train_s"] for r in sb]
    fr_ret, sb_ret = [r["eval_mean"] for r in fr], [r["eval_mean"] for r in sb]
    fr_cpu, sb_cpu = [r["train_cpu_s"] for r in fr], [r["train_cpu_s"] for r in sb]
    clock = _report.paired_ratio(zip(fr_t, sb_t, strict=True))
    episodes = fr[0].get("eval_episodes") or spec.eval_episodes
    algo = spec.algo.upper()

    budget_note = ""
    if timesteps != spec.timesteps:
        budget_note = (
            f" (Budget {timesteps:,} env steps instead of the default {spec.timesteps:,}: "
            "not a check of the target as stated.)"
        )

    row = _sb3.figure_row
    split_cells = []
    for key in SPLIT:
        values = [(r.get("time_split") or {}).get(key) for r in fr]
        values = [v for v in values if v is not None]
        split_cells.append(f"{key} {_report.mmm(values, '{:.1f}')}" if values else f"{key} -")
    others = [v for v in (other_s(r) for r in fr) if v is not None]
    split_cells.append(f"other {_report.mmm(others, '{:.1f}')}" if others else "other -")
    table = [
        row("training wall-clock, s", fr_t, sb_t, "{:.1f}"),
        row("frugalrl training vs SB3 `.learn()` alone, s", fr_t, [r["learn_call_s"] for r in sb], "{:.1f}"),
        row("training CPU-s (the process, every thread)", fr_cpu, sb_cpu, "{:.1f}"),
        row(f"final eval return ({episodes} det. episodes)", fr_ret, sb_ret, "{:.1f}", positive=True),
        row("env steps run", [r["env_steps"] for r in fr], [r["env_steps"] for r in sb], "{:,}"),
        row("gradient steps", [r.get("gradient_steps") for r in fr], [r.get("gradient_steps") for r in sb], "{:,}"),
        ["frugalrl time split (summary.json), s", "; ".join(split_cells), "", "", ""],
    ]
    summary = _sb3.summary_table(table)

    header = [
        "seed",
        "frugalrl training s",
        "SB3 training s (`.learn()` alone)",
        "frugalrl / SB3 time",
        "training CPU-s frugalrl / SB3",
        "frugalrl eval return",
        "SB3 eval return",
        "frugalrl env / act / learn / other s",
        "gradient steps frugalrl / SB3",
        "load (1 min) after frugalrl / SB3",
    ]
    per_seed_rows = []
    for r in results:
        a, b = r["frugalrl"], r["sb3"]
        split = a.get("time_split") or {}
        per_seed_rows.append(
            [
                str(r["seed"]),
                f"{a['train_s']:.1f}",
                f"{b['train_s']:.1f} ({b['learn_call_s']:.1f})",
                f"{a['train_s'] / b['train_s']:.2f}",
                f"{a['train_cpu_s']:.1f} / {b['train_cpu_s']:.1f}",
                f"{a['eval_mean']:.1f}",
                f"{b['eval_mean']:.1f}",
                " / ".join([*(opt(split.get(k), "{:.1f}") for k in SPLIT), opt(other_s(a), "{:.1f}")]),
                f"{opt(a.get('gradient_steps'), '{:,}')} / {opt(b.get('gradient_steps'), '{:,}')}",
                f"{opt(_report.load1(a['load_after']), '{:.2f}')} / {opt(_report.load1(b['load_after']), '{:.2f}')}",
            ]
        )
    per_seed = _report.markdown_table(header, per_seed_rows)

    threads = sorted({r["torch_threads"] for r in rows})
    fr_steps = sorted({r["env_steps"] for r in fr})
    sb_steps = sorted({r["env_steps"] for r in sb})
    lines = [
        *_sb3.header_lines(rows, NAME),
        f"- seeds: {n} ({', '.join(str(r['seed']) for r in results)})"
        + (f"; seeds without both contenders, left out: {incomplete}" if incomplete else "")
        + f"; budget: {timesteps:,} env steps per run (default for {spec.env_id}: {spec.timesteps:,}); env steps "
        f"run (whole learning phases): frugalrl {'/'.join(f'{s:,}' for s in fr_steps)}, SB3 "
        f"{'/'.join(f'{s:,}' for s in sb_steps)}; order per seed: frugalrl then SB3, each in a fresh subprocess; "
        f"torch threads: {'/'.join(str(t) for t in threads)}",
        f"- frugalrl: `{spec.config}` with {', '.join(f'`{o}`' for o in fr[0]['settings']['overrides'])}"
        + ("; `dqn.double=false` turns Double DQN off, as SB3's DQN" if spec.algo == "dqn" else ""),
        f'- SB3: `{algo}("MlpPolicy", env, seed=seed, device="cpu", ...)` with the same hyperparameters, read from '
        f"that file: {_sb3.describe({k: v for k, v in sb[0]['settings'].items() if k != algo})}",
        "- training s: frugalrl = wall-clock around `train()` minus its final evaluation (`eval_s`): env and learner "
        "construction, all env and gradient steps, checkpoint writes, policy export; MLflow off. SB3 = wall-clock "
        f"around `make_vec_env` + `{algo}(...)` + `.learn()` (in parentheses: `.learn()` alone). Imports are not "
        "timed (both workers import `torch._dynamo` and the env's module before the clock starts). Training CPU-s: "
        "the worker process's CPU time over the same region (frugalrl: minus its evaluation's `eval_cpu_s`).",
        "- frugalrl time split: `summary.json`'s `env_s` (env steps), `act_s` (acting), `learn_s` (gradient steps, "
        "replay sampling included); other = training s minus those three (replay writes, the loop, construction, "
        "checkpoints, export).",
        f"- eval return: mean of {episodes} deterministic episodes, episode i reset with seed {_sb3.EVAL_SEED}+i "
        "(frugalrl: `summary['eval_mean']`; SB3: same seeds, `model.predict(obs, deterministic=True)`); "
        + ("SAC: the squashed mean action." if spec.algo == "sac" else "DQN: the greedy action."),
        "- gradient steps: frugalrl `summary.json` (`gradient_updates`, SAC `optimizer_steps`), SB3 `_n_updates`.",
        _sb3.RATIOS_LINE,
        "- Other processes may share the machine; see the load average.",
    ]
    return _sb3.section(
        f"{algo} on {spec.env_id}, RL Zoo hyperparameters on both sides (see the script's docstring).",
        lines,
        target_line(spec.algo, clock, fr_ret, sb_ret, budget_note),
        summary,
        per_seed,
    )


# --------------------------------------------------------------------------- main
def run_env(
    spec: EnvSpec, timesteps: int, seeds: list[int], common: dict, results_path: Path, resume: bool
) -> list[dict]:
    kept: list[dict] = []
    if resume:  # the newest batch of this env at this budget goes on: its runs are skipped, new rows join it
        kept = _report.newest_batch(_report.read_rows(results_path), env=spec.env_id, timesteps=timesteps)
        if kept:
            common = {**common, "batch": kept[0]["batch"]}
    done = {(r["seed"], r["contender"]) for r in kept}
    jobs = _harness.interleave(seeds, CONTENDERS)
    for seed, kind in [j for j in jobs if j in done]:
        print(f"{spec.env_id} seed {seed} {kind}: kept in batch {common['batch']}, skipped", flush=True)

    def one(job: tuple[int, str]) -> dict:
        seed, kind = job
        args = ["--worker", kind, "--env", spec.env_id, "--seed", seed, "--timesteps", timesteps]
        return {"env": spec.env_id, "algo": spec.algo, "timesteps": timesteps, "seed": seed, "contender": kind,
                **_harness.worker(__spec__.name, args)}  # fmt: skip

    def line(row: dict) -> str:
        return (f"{spec.env_id} seed {row['seed']} {row['contender']:8s} train {row['train_s']:7.1f} s  "
                f"cpu {row['train_cpu_s']:7.1f} s  eval {row['eval_mean']:8.1f}  steps {row['env_steps']:,}  "
                f"gradient steps {row['gradient_steps']}  load {row['load_after']}")  # fmt: skip

    new = _harness.measure([j for j in jobs if j not in done], one, results_path, common, line)
    return [*kept, *new]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--env", nargs="+", choices=sorted(ENVS), default=["Pendulum-v1"], help="one or more envs, one section each"
    )
    parser.add_argument(
        "--seeds", type=int, default=None, help="seeds first-seed .. first-seed+N-1 (default 5, HalfCheetah 3)"
    )
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument(
        "--timesteps", type=int, default=None, help="env-step budget per run (default: each env's, see the docstring)"
    )
    parser.add_argument(
        "--resume", action="store_true", help="go on with the newest batch of each env at its budget, skipping its runs"
    )
    _report.add_output_args(parser, NAME)
    parser.add_argument("--worker", choices=CONTENDERS, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--result", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    specs = [ENVS[e] for e in dict.fromkeys(args.env)]

    if args.worker:
        if args.seed is None or args.timesteps is None or len(specs) != 1:
            parser.error("--worker needs --seed, --timesteps and one --env")
        fn = worker_frugalrl if args.worker == "frugalrl" else worker_sb3
        _harness.write_result(fn(specs[0], args.seed, args.timesteps), args.result)
        return

    common = None if args.report_only else _report.batch_common()  # one batch id for every env of the command
    for spec in specs:
        timesteps = args.timesteps or spec.timesteps
        seeds = list(range(args.first_seed, args.first_seed + (args.seeds or spec.seeds)))
        print(f"\n## {spec.env_id} ({spec.section})\n")
        _report.run_or_render(
            spec.section,
            args,
            run=lambda a, spec=spec, timesteps=timesteps, seeds=seeds: run_env(
                spec, timesteps, seeds, common, a.results, a.resume
            ),
            render=lambda rows, _, spec=spec, timesteps=timesteps: render(spec, rows, timesteps),
            select=lambda rows, _, spec=spec, timesteps=timesteps: _report.newest_batch(
                rows, env=spec.env_id, timesteps=timesteps
            ),
            after=SECTION_AFTER.get(spec.section, ()),
            empty=_report.no_rows(NAME),
        )


if __name__ == "__main__":
    main()
