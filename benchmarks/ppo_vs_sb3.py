"""PPO: frugalrl against Stable-Baselines3 on CartPole-v1, LunarLander-v3 and HalfCheetah-v5, side by side.

Both learners train the same algorithm with the same hyperparameters. frugalrl runs its config file;
the SB3 side is plain SB3 as a user runs it (``make_vec_env`` + ``PPO(...)`` + ``.learn(n)``) with the
RL Zoo hyperparameters (rl-baselines3-zoo ``hyperparams/ppo.yml``) read from that same YAML file:

* ``CartPole-v1``    ``configs/cartpole-ppo.yaml``     default budget 100k env steps
* ``LunarLander-v3`` ``configs/lunarlander-ppo.yaml``  default budget 1M env steps
* ``HalfCheetah-v5`` ``configs/halfcheetah-ppo.yaml``  default budget 1M env steps

Config -> SB3: ``env.num_envs`` -> ``n_envs``; ``ppo.num_steps`` -> ``n_steps``; ``batch_size``;
``update_epochs`` -> ``n_epochs``; ``learning_rate`` (``anneal_lr`` -> ``lambda p: p * lr``);
``clip_coef`` -> ``clip_range`` (``anneal_clip`` -> linear schedule); ``clip_vloss`` -> ``clip_range_vf``
(off -> None); ``gamma``, ``gae_lambda``, ``ent_coef``, ``vf_coef``, ``max_grad_norm``, ``target_kl``;
``norm_adv`` -> ``normalize_advantage``; ``adam_eps`` (SB3's PPO uses 1e-5 too); ``policy.hidden`` ->
``net_arch=dict(pi=hidden, vf=hidden)``, ``activation`` -> ``nn.Tanh``/``nn.ReLU``, ``ortho_init``,
``log_std_init`` (continuous actions). ``env.normalize_obs``/``normalize_reward`` -> ``VecNormalize(norm_obs,
norm_reward, gamma=gamma, clip_obs)``; SB3's VecNormalize also clips the scaled reward at 10 (its default,
as RL Zoo runs it; frugalrl's ``env.clip_reward`` is unset). Settings without an SB3 counterpart
(env kwargs, frame stacking, changed dynamics, fractal blocks, adapters) make the SB3 worker refuse to run.

For every seed the script runs frugalrl, then SB3 (A B A B ...), each in a fresh subprocess with
``torch.set_num_threads(1)``, so no threads, caches or RNG state leak from one run to the next.

Timed figure ("training wall-clock"):

* frugalrl: wall-clock around ``train(cfg, out_dir)`` minus its final evaluation (``summary["eval_s"]``).
  It covers building the vector env and agent, all updates, checkpoint writes and exporting ``policy.pt``.
  MLflow tracking is off. ``summary.json``'s ``env_s``/``act_s``/``learn_s``, ``optimizer_steps`` and
  ``compile`` are recorded too (missing keys are recorded as null).
* SB3: wall-clock around ``make_vec_env(env_id, n_envs, seed=seed)`` (+ ``VecNormalize``) and ``PPO(...)``
  plus ``.learn(total_timesteps)``. ``.learn()`` alone is reported too.

Imports are not timed: both workers import ``torch._dynamo`` (which ``torch.optim`` otherwise imports lazily)
and the env's module (Box2D, MuJoCo) before the clock starts.

Final return: deterministic episodes (CartPole 20, LunarLander 20, HalfCheetah 10), episode i reset with
seed 10000+i. frugalrl: ``summary["eval_mean"]`` (its own evaluator does exactly that; the exported policy
carries its frozen observation statistics); SB3: ``gym.make(env_id)``, ``reset(seed=10000+i)``,
``model.predict(obs, deterministic=True)`` until the episode ends, with HalfCheetah's observations
normalised by the trained VecNormalize's frozen statistics (``training=False, norm_reward=False``).

Time to threshold (CartPole 475, LunarLander 200): the first update after which the mean return of the
last 100 finished training episodes reaches it (frugalrl's ``episode_return`` metric; SB3's
``ep_info_buffer``, the same 100-episode window), as env steps and seconds since the start of training.

Targets (time as frugalrl / SB3, lower is better): CartPole: <= 0.33 and 5 of 5 seeds with eval return
>= 475. LunarLander: <= 0.5 at an equal or better median eval return. HalfCheetah: none, figures only.

Every run appends one JSON row to ``benchmarks/results/ppo_vs_sb3.jsonl`` (env, seed, contender, figures,
load average, timestamp, git commit, command line, a ``batch`` id shared by one invocation).
``--report-only`` re-renders the tables from the newest batch of that file for the given envs and budget
without running anything; ``--write`` puts one section per env into ``docs/benchmarks.md``.

Run from the repository root, one env per command (rough run times for 5 seeds on 2 cores; the LunarLander
and HalfCheetah figures are extrapolated from short runs, not measured end to end)::

    nohup python -m benchmarks.ppo_vs_sb3 --env CartPole-v1 --write > /tmp/ppo_vs_sb3_cartpole.log 2>&1 &
        # about 10 minutes
    nohup python -m benchmarks.ppo_vs_sb3 --env LunarLander-v3 --write > /tmp/ppo_vs_sb3_lunar.log 2>&1 &
        # about 1-1.5 hours (one 16k-step rollout + update: ~5 s frugalrl, ~7.5 s SB3; 61 of them per run)
    nohup python -m benchmarks.ppo_vs_sb3 --env HalfCheetah-v5 --write > /tmp/ppo_vs_sb3_cheetah.log 2>&1 &
        # about 4-6 hours (~1.5 ms per env step frugalrl, ~2 ms SB3, incl. the 20-epoch updates)
    python -m benchmarks.ppo_vs_sb3 --report-only --env CartPole-v1 LunarLander-v3 HalfCheetah-v5 --write
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import _harness, _report, _sb3
from ._report import opt

EVAL_SEED = _sb3.EVAL_SEED
CONTENDERS = ("frugalrl", "sb3")
SB3_ADAM_EPS = 1e-5  # ActorCriticPolicy's Adam eps


@dataclass(frozen=True)
class EnvSpec:
    env_id: str
    config: str  # relative to the repository root
    timesteps: int  # default budget
    eval_episodes: int
    section: str  # docs/benchmarks.md section name
    reach: float | None  # training-return threshold for "time to threshold"; None = not reported
    max_ratio: float | None  # target: frugalrl / SB3 training wall-clock at most this; None = no target
    target: str  # "cartpole": all (5 of 5) seeds >= reach; "median_return": median eval not below SB3's; "": none


ENVS = {
    spec.env_id: spec
    for spec in (
        EnvSpec("CartPole-v1", "configs/cartpole-ppo.yaml", 100_000, 20, "ppo_vs_sb3", 475.0, 0.33, "cartpole"),
        EnvSpec(
            "LunarLander-v3",
            "configs/lunarlander-ppo.yaml",
            1_000_000,
            20,
            "ppo_vs_sb3_lunarlander",
            200.0,
            0.5,
            "median_return",
        ),
        EnvSpec(
            "HalfCheetah-v5", "configs/halfcheetah-ppo.yaml", 1_000_000, 10, "ppo_vs_sb3_halfcheetah", None, None, ""
        ),
    )
}
CARTPOLE_SEEDS = 5  # the CartPole target counts 5 of 5 seeds
# Where a section that docs/benchmarks.md does not have yet goes (after the first of these that it has).
SECTION_AFTER = {
    "ppo_vs_sb3_lunarlander": ("ppo_vs_sb3",),
    "ppo_vs_sb3_halfcheetah": ("ppo_vs_sb3_lunarlander", "ppo_vs_sb3"),
}


def frugalrl_overrides(spec: EnvSpec, seed: int, timesteps: int) -> list[str]:
    return [
        "tracking.enabled=false",
        f"seed={seed}",
        f"ppo.total_timesteps={timesteps}",
        "threads=1",
        f"eval.episodes={spec.eval_episodes}",
        f"eval.seed={EVAL_SEED}",
        "eval.deterministic=true",
    ]


# --------------------------------------------------------------------------- config -> SB3
def sb3_settings(cfg: Any) -> tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any]]:
    """The SB3 ``PPO(...)`` keyword arguments and ``VecNormalize`` arguments (None: no VecNormalize) that
    train what the frugalrl config ``cfg`` trains, and a JSON-able description of both.

    Raises ``ValueError`` for settings SB3's PPO has no counterpart for, instead of training something else.
    """
    from torch import nn

    env, pol, hp = cfg.env, cfg.policy, cfg.ppo
    problems = _sb3.refusals(cfg, "ppo")
    if problems:
        raise ValueError(f"{cfg.name}: no SB3 counterpart for {'; '.join(problems)}")

    def linear(value: float):
        return lambda progress_remaining: progress_remaining * value

    def maybe_linear(value: float, anneal: bool) -> tuple[Any, Any]:
        return (linear(value), f"linear {value:g} -> 0") if anneal else (value, value)

    lr, lr_text = maybe_linear(hp.learning_rate, hp.anneal_lr)
    clip, clip_text = maybe_linear(hp.clip_coef, hp.anneal_clip)
    kwargs: dict[str, Any] = dict(
        n_steps=hp.num_steps,
        batch_size=hp.batch_size,
        n_epochs=hp.update_epochs,
        learning_rate=lr,
        clip_range=clip,
        clip_range_vf=clip if hp.clip_vloss else None,
        gamma=hp.gamma,
        gae_lambda=hp.gae_lambda,
        ent_coef=hp.ent_coef,
        vf_coef=hp.vf_coef,
        max_grad_norm=hp.max_grad_norm,
        target_kl=hp.target_kl,
        normalize_advantage=hp.norm_adv,
    )
    activation = {"tanh": nn.Tanh, "relu": nn.ReLU}[pol.activation]
    policy_kwargs: dict[str, Any] = dict(
        net_arch=dict(pi=list(pol.hidden), vf=list(pol.hidden)), activation_fn=activation, ortho_init=pol.ortho_init
    )
    if _sb3.continuous(env.id):
        policy_kwargs["log_std_init"] = pol.log_std_init
    if hp.adam_eps != SB3_ADAM_EPS:
        policy_kwargs["optimizer_kwargs"] = dict(eps=hp.adam_eps)
    kwargs["policy_kwargs"] = policy_kwargs

    normalize = None
    if env.normalize_obs or env.normalize_reward:
        normalize = dict(norm_obs=env.normalize_obs, norm_reward=env.normalize_reward, gamma=hp.gamma)
        normalize["clip_obs"] = env.clip_obs
        if env.clip_reward is not None:
            normalize["clip_reward"] = env.clip_reward

    described = {
        "n_envs": env.num_envs,
        **{
            k: v
            for k, v in kwargs.items()
            if k not in ("learning_rate", "clip_range", "clip_range_vf", "policy_kwargs")
        },
        "learning_rate": lr_text,
        "clip_range": clip_text,
        "clip_range_vf": clip_text if hp.clip_vloss else None,
        "policy_kwargs": {
            **{k: v for k, v in policy_kwargs.items() if k != "activation_fn"},
            "activation_fn": f"nn.{activation.__name__}",
        },
        "VecNormalize": normalize,
    }
    return kwargs, normalize, described


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
        out_dir = Path(tmp) / "run"
        started = time.perf_counter()
        summary = train(cfg, out_dir, interactive=False)
        total = time.perf_counter() - started
        reached = _harness.first_reaching(out_dir, spec.reach) if spec.reach is not None else None
        reach_steps = int(reached["step"]) if reached else None
        reach_s = reached["step"] / reached["sps"] if reached else None  # sps = global_step / meter.wall_s then
    return {
        "train_s": total - summary["eval_s"],
        "total_s": total,
        "summary_wall_minus_eval_s": summary["wall_s"] - summary["eval_s"],
        "learn_call_s": None,
        "learn_s": summary.get("learn_s"),
        "act_s": summary.get("act_s"),
        "env_s": summary.get("env_s"),
        "optimizer_steps": summary.get("optimizer_steps"),
        "compile": summary.get("compile"),
        "compile_config": getattr(cfg.ppo, "compile", None),
        "updates": summary.get("updates"),
        "eval_mean": summary["eval_mean"],
        "eval_returns": summary.get("eval_returns"),
        "eval_episodes": summary.get("eval_episodes"),
        "env_steps": summary["real_env_steps"],
        "reach_steps": reach_steps,
        "reach_s": reach_s,
        "torch_threads": torch.get_num_threads(),
        "settings": {"config": spec.config, "overrides": overrides},
    }


def worker_sb3(spec: EnvSpec, seed: int, timesteps: int) -> dict:
    import torch

    torch.set_num_threads(1)
    _sb3.preimport(spec.env_id)
    import numpy as np
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    from frugalrl.config import load_config

    cfg = load_config(_report.REPO_ROOT / spec.config, frugalrl_overrides(spec, seed, timesteps))
    kwargs, normalize, described = sb3_settings(cfg)

    class ReachTarget(BaseCallback):
        """Notes the first update after which the 100-episode training mean reaches the threshold."""

        def __init__(self, started: float):
            super().__init__()
            self.started = started
            self.reach_steps: int | None = None
            self.reach_s: float | None = None

        def _check(self) -> None:
            buf = self.model.ep_info_buffer
            if self.reach_steps is None and buf and np.mean([ep["r"] for ep in buf]) >= spec.reach:
                self.reach_steps = int(self.model.num_timesteps)
                self.reach_s = time.perf_counter() - self.started

        def _on_step(self) -> bool:
            return True

        # on_rollout_start of update k+1 comes right after the gradient steps of update k.
        def _on_rollout_start(self) -> None:
            self._check()

        def _on_training_end(self) -> None:
            self._check()

    started = time.perf_counter()
    env = make_vec_env(spec.env_id, n_envs=cfg.env.num_envs, seed=seed)
    if normalize is not None:
        env = VecNormalize(env, **normalize)
    model = PPO("MlpPolicy", env, seed=seed, device="cpu", **kwargs)
    callback = ReachTarget(started) if spec.reach is not None else None
    learn_started = time.perf_counter()
    model.learn(timesteps, callback=callback)
    ended = time.perf_counter()

    if normalize is not None:  # evaluation: the frozen observation statistics, raw rewards
        env.training = False
        env.norm_reward = False

    def act(obs: Any) -> Any:
        policy_obs = env.normalize_obs(obs) if normalize is not None and normalize["norm_obs"] else obs
        return model.predict(policy_obs, deterministic=True)[0]

    returns = _sb3.eval_returns(spec.env_id, act, spec.eval_episodes)
    env.close()

    # SB3 counts no optimizer steps; without target_kl every update runs n_epochs passes over the rollout.
    rollout = cfg.env.num_envs * cfg.ppo.num_steps
    updates = -(-int(model.num_timesteps) // rollout)
    optimizer_steps = (
        updates * cfg.ppo.update_epochs * -(-rollout // cfg.ppo.batch_size) if cfg.ppo.target_kl is None else None
    )
    return {
        "train_s": ended - started,
        "total_s": None,
        "learn_call_s": ended - learn_started,
        "learn_s": None,
        "act_s": None,
        "env_s": None,
        "optimizer_steps": optimizer_steps,
        "compile": None,
        "compile_config": None,
        "updates": updates,
        "eval_mean": float(np.mean(returns)),
        "eval_returns": returns,
        "eval_episodes": len(returns),
        "env_steps": int(model.num_timesteps),
        "reach_steps": callback.reach_steps if callback else None,
        "reach_s": callback.reach_s if callback else None,
        "torch_threads": torch.get_num_threads(),
        "settings": {"PPO": "MlpPolicy", **described},
    }


# --------------------------------------------------------------------------- report
def target_line(
    spec: EnvSpec,
    n: int,
    time_per_seed: list[float],
    time_of_medians: float,
    fr_ret: list[float],
    sb_ret: list[float],
    budget_note: str,
) -> str:
    if spec.max_ratio is None:
        return f"**No target for {spec.env_id}: the figures are reported as measured.**{budget_note}"
    med = statistics.median(time_per_seed)
    time_ok = med <= spec.max_ratio
    time_text = (
        f"training wall-clock frugalrl / SB3, median of per-seed ratios {med:.2f} (min {min(time_per_seed):.2f}, "
        f"max {max(time_per_seed):.2f}; ratio of medians {time_of_medians:.2f}): "
        f"{'met' if time_ok else 'missed'}"
    )
    if (time_of_medians <= spec.max_ratio) != time_ok:
        time_text += (
            f" (the ratio of medians alone would have {'met' if time_of_medians <= spec.max_ratio else 'missed'} it)"
        )
    if spec.target == "cartpole":
        fr_hit = sum(v >= spec.reach for v in fr_ret)
        sb_hit = sum(v >= spec.reach for v in sb_ret)
        goal = (
            f"frugalrl training wall-clock at most {spec.max_ratio:.2f}x SB3's "
            f"(frugalrl / SB3 <= {spec.max_ratio:.2f}) "
            f"and {CARTPOLE_SEEDS} of {CARTPOLE_SEEDS} seeds with eval return >= {spec.reach:.0f}"
        )
        if n < CARTPOLE_SEEDS:
            ret_ok = False
            ret_text = (
                f"eval return >= {spec.reach:.0f}: frugalrl {fr_hit}/{n} seeds (SB3 {sb_hit}/{n}), "
                f"missed: only {n} seed(s) run, the target counts {CARTPOLE_SEEDS}"
            )
        else:
            ret_ok = fr_hit == n
            ret_text = (
                f"eval return >= {spec.reach:.0f}: frugalrl {fr_hit}/{n} seeds (SB3 {sb_hit}/{n}): "
                f"{'met' if ret_ok else 'missed'}"
            )
    else:
        fr_med, sb_med = statistics.median(fr_ret), statistics.median(sb_ret)
        ret_ok = fr_med >= sb_med
        goal = f"frugalrl / SB3 training wall-clock <= {spec.max_ratio:.2f} at an equal or better median eval return"
        ret_text = f"median eval return frugalrl {fr_med:.1f} vs SB3 {sb_med:.1f}: {'met' if ret_ok else 'missed'}"
    verdict = "met" if time_ok and ret_ok else "missed"
    return f"**Target: {goal}. Measured: {time_text}; {ret_text}. Overall: {verdict}.**{budget_note}"


def render(spec: EnvSpec, rows: list[dict], timesteps: int) -> str:
    results, incomplete = _report.by_seed(rows, CONTENDERS)
    if not results:
        raise ValueError(f"{spec.env_id}: no seed with both contenders in batch {rows[0]['batch']}")
    n = len(results)
    fr = [r["frugalrl"] for r in results]
    sb = [r["sb3"] for r in results]
    fr_t, sb_t = [r["train_s"] for r in fr], [r["train_s"] for r in sb]
    sb_learn = [r["learn_call_s"] for r in sb]
    fr_ret, sb_ret = [r["eval_mean"] for r in fr], [r["eval_mean"] for r in sb]
    clock = _report.paired_ratio(zip(fr_t, sb_t, strict=True))
    time_of_medians, time_per_seed = clock.of_medians, clock.per_seed
    episodes = fr[0].get("eval_episodes") or spec.eval_episodes

    budget_note = ""
    if timesteps != spec.timesteps:
        budget_note = (
            f" (Budget {timesteps:,} env steps instead of the default {spec.timesteps:,}: "
            "not a check of the target as stated.)"
        )

    row = _sb3.figure_row
    table = [
        row("training wall-clock, s", fr_t, sb_t, "{:.1f}"),
        row("frugalrl training vs SB3 `.learn()` alone, s", fr_t, sb_learn, "{:.1f}"),
        row(f"final eval return ({episodes} det. episodes)", fr_ret, sb_ret, "{:.1f}", positive=True),
    ]
    if spec.reach is not None:
        fr_hit = sum(v >= spec.reach for v in fr_ret)
        sb_hit = sum(v >= spec.reach for v in sb_ret)
        table.append([f"seeds with eval return >= {spec.reach:.0f}", f"{fr_hit}/{n}", f"{sb_hit}/{n}", "", ""])
        fr_reach = [r["reach_s"] for r in fr]
        sb_reach = [r["reach_s"] for r in sb]
        reached = row(
            f"s to 100-episode training mean >= {spec.reach:.0f} (seeds that reach it)", fr_reach, sb_reach, "{:.1f}"
        )
        k_fr = sum(v is not None for v in fr_reach)
        k_sb = sum(v is not None for v in sb_reach)
        reached[1] = (reached[1] if k_fr else "missed") + f" [{k_fr}/{n}]"
        reached[2] = (reached[2] if k_sb else "missed") + f" [{k_sb}/{n}]"
        table.append(reached)
    table.append(row("env steps run", [r["env_steps"] for r in fr], [r["env_steps"] for r in sb], "{:,}"))
    fr_opt = [r.get("optimizer_steps") for r in fr]
    opt_row = row(
        "optimizer steps (SB3: computed, n_epochs x minibatches x updates)",
        fr_opt,
        [r.get("optimizer_steps") for r in sb],
        "{:,}",
    )
    if all(v is None for v in fr_opt):
        opt_row[1] = "not in summary.json"
    table.append(opt_row)
    split = []
    for key in ("env_s", "act_s", "learn_s"):
        values = [r.get(key) for r in fr if r.get(key) is not None]
        split.append(f"{key} {_report.mmm(values, '{:.1f}')}" if values else f"{key} -")
    table.append(["frugalrl time split (summary.json), s", "; ".join(split), "", "", ""])
    compiles = sorted({f"{r.get('compile') or 'not in summary.json'} (config: {r.get('compile_config')})" for r in fr})
    table.append(["frugalrl compile mode (summary.json)", ", ".join(compiles), "", "", ""])
    summary = _sb3.summary_table(table)

    header = [
        "seed",
        "frugalrl training s",
        "SB3 training s (`.learn()` alone)",
        "frugalrl / SB3 time",
        "frugalrl eval return",
        "SB3 eval return",
        "frugalrl / SB3 return",
    ]
    if spec.reach is not None:
        header += [f"frugalrl reaches {spec.reach:.0f} (steps / s)", f"SB3 reaches {spec.reach:.0f} (steps / s)"]
    header += ["frugalrl env / act / learn s", "optimizer steps frugalrl / SB3", "load (1 min) after frugalrl / SB3"]
    per_seed_rows = []
    for r in results:
        a, b = r["frugalrl"], r["sb3"]
        ret_ratio = f"{a['eval_mean'] / b['eval_mean']:.2f}" if a["eval_mean"] > 0 and b["eval_mean"] > 0 else "n/a"
        cells = [
            str(r["seed"]),
            f"{a['train_s']:.1f}",
            f"{b['train_s']:.1f} ({b['learn_call_s']:.1f})",
            f"{a['train_s'] / b['train_s']:.2f}",
            f"{a['eval_mean']:.1f}",
            f"{b['eval_mean']:.1f}",
            ret_ratio,
        ]
        if spec.reach is not None:
            cells += [
                f"{opt(a['reach_steps'], '{:,}', 'missed')} / {opt(a['reach_s'], '{:.1f} s', 'missed')}",
                f"{opt(b['reach_steps'], '{:,}', 'missed')} / {opt(b['reach_s'], '{:.1f} s', 'missed')}",
            ]
        cells += [
            " / ".join(opt(a.get(k), "{:.1f}") for k in ("env_s", "act_s", "learn_s")),
            f"{opt(a.get('optimizer_steps'), '{:,}')} / {opt(b.get('optimizer_steps'), '{:,}')}",
            f"{opt(_report.load1(a['load_after']), '{:.2f}')} / {opt(_report.load1(b['load_after']), '{:.2f}')}",
        ]
        per_seed_rows.append(cells)
    per_seed = _report.markdown_table(header, per_seed_rows)

    threads = sorted({r["torch_threads"] for r in rows})
    fr_steps = sorted({r["env_steps"] for r in fr})
    sb_steps = sorted({r["env_steps"] for r in sb})
    lines = [
        *_sb3.header_lines(rows, "ppo_vs_sb3"),
        f"- seeds: {n} ({', '.join(str(r['seed']) for r in results)})"
        + (f"; seeds without both contenders, left out: {incomplete}" if incomplete else "")
        + f"; budget: {timesteps:,} env steps per run (default for {spec.env_id}: {spec.timesteps:,}); env steps "
        f"run (whole rollouts): frugalrl {'/'.join(f'{s:,}' for s in fr_steps)}, SB3 "
        f"{'/'.join(f'{s:,}' for s in sb_steps)}; order per seed: frugalrl then SB3, each in a fresh subprocess; "
        f"torch threads: {'/'.join(str(t) for t in threads)}",
        f"- frugalrl: `{spec.config}` with {', '.join(f'`{o}`' for o in fr[0]['settings']['overrides'])}",
        f'- SB3: `PPO("MlpPolicy", env, seed=seed, device="cpu", ...)` with the same hyperparameters, read from '
        f"that file: {_sb3.describe({k: v for k, v in sb[0]['settings'].items() if k != 'PPO'})}",
        "- training s: frugalrl = wall-clock around `train()` minus its final evaluation (`eval_s`): env and agent "
        "construction, all updates, checkpoint writes, policy export; MLflow off. SB3 = wall-clock around "
        "`make_vec_env` (+ `VecNormalize`) + `PPO(...)` + `.learn()` (in parentheses: `.learn()` alone). Imports "
        "are not timed (both workers import `torch._dynamo` and the env's module before the clock starts).",
        f"- eval return: mean of {episodes} deterministic episodes, episode i reset with seed {EVAL_SEED}+i "
        "(frugalrl: `summary['eval_mean']`; SB3: same seeds, `model.predict(obs, deterministic=True)`"
        + (
            ", observations normalised with VecNormalize's frozen statistics"
            if sb[0]["settings"].get("VecNormalize")
            else ""
        )
        + ").",
        _sb3.RATIOS_LINE,
    ]
    if spec.reach is not None:
        lines.append(
            f"- reaches {spec.reach:.0f}: first update after which the mean return of the last 100 finished training "
            "episodes is >= the threshold; env steps and seconds since training started (frugalrl: cost meter "
            "start; SB3: start of the timed region). 'missed' = never within the budget."
        )
    lines.append("- Other processes may share the machine; see the load average.")
    tl = target_line(spec, n, time_per_seed, time_of_medians, fr_ret, sb_ret, budget_note)
    return _sb3.section(
        f"PPO on {spec.env_id}, RL Zoo hyperparameters on both sides (see the script's docstring).",
        lines,
        tl,
        summary,
        per_seed,
    )


# --------------------------------------------------------------------------- main


def run_env(spec: EnvSpec, timesteps: int, seeds: list[int], common: dict, results_path: Path) -> list[dict]:
    def one(job: tuple[int, str]) -> dict:
        seed, kind = job
        args = ["--worker", kind, "--env", spec.env_id, "--seed", seed, "--timesteps", timesteps]
        return {"env": spec.env_id, "timesteps": timesteps, "seed": seed, "contender": kind,
                **_harness.worker(__spec__.name, args)}  # fmt: skip

    def line(row: dict) -> str:
        return (f"{spec.env_id} seed {row['seed']} {row['contender']:8s} train {row['train_s']:7.1f} s  eval "
                f"{row['eval_mean']:8.1f}  steps {row['env_steps']:,}  reach {row['reach_steps']} / {row['reach_s']}  "
                f"load {row['load_after']}")  # fmt: skip

    return _harness.measure(_harness.interleave(seeds, CONTENDERS), one, results_path, common, line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--env", nargs="+", choices=sorted(ENVS), default=["CartPole-v1"], help="one or more envs, one section each"
    )
    parser.add_argument("--seeds", type=int, default=5, help="number of seeds (first-seed .. first-seed+N-1)")
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument(
        "--timesteps", type=int, default=None, help="env-step budget per run (default: 100k CartPole, 1M the others)"
    )
    _report.add_output_args(parser, "ppo_vs_sb3")
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

    if args.report_only:  # an env without rows at this budget is left out (its section stays as it is)
        kept = _report.read_rows(args.results)
        missing = [
            s for s in specs if not _report.newest_batch(kept, env=s.env_id, timesteps=args.timesteps or s.timesteps)
        ]
        for spec in missing:
            budget = args.timesteps or spec.timesteps
            print(f"{spec.env_id}: no rows at {budget:,} env steps in {args.results}; skipped", file=sys.stderr)
        specs = [s for s in specs if s not in missing]
        if not specs:
            sys.exit(1)
    common = None if args.report_only else _report.batch_common()  # one batch id for every env of the command
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    for spec in specs:
        timesteps = args.timesteps or spec.timesteps
        print(f"\n## {spec.env_id} ({spec.section})\n")
        _report.run_or_render(
            spec.section,
            args,
            run=lambda a, spec=spec, timesteps=timesteps: run_env(spec, timesteps, seeds, common, a.results),
            render=lambda rows, _, spec=spec, timesteps=timesteps: render(spec, rows, timesteps),
            select=lambda rows, _, spec=spec, timesteps=timesteps: _report.newest_batch(
                rows, env=spec.env_id, timesteps=timesteps
            ),
            after=SECTION_AFTER.get(spec.section, ()),
        )


if __name__ == "__main__":
    main()
