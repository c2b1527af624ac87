"""Env steps per second: frugalrl's env factory against a plain gymnasium step loop, side by side.

For each env id the contenders run in turn within each repeat (A B C A B C ...), each on a freshly
built env, reset with the same seed, stepping the same pre-generated random actions (so action
sampling is not timed). A step is one agent step (one ``env.step`` of one env); for a vector env of
N copies one ``step`` call counts N. Building the env, the first reset and a short warm-up are not
timed; the resets at episode ends are (the factory does them inside ``step``, the plain loop calls
``reset``).

Contenders:

* ``frugalrl make_vec_env`` - ``make_vec_env(EnvConfig(id=..., num_envs=N))``: ``FastSyncVectorEnv``
  for CartPole and MuJoCo; for ALE ids ale-py's native ``AtariVectorEnv`` (84x84 grayscale,
  frameskip 4 with max-pool, 4-frame stack, no-op and fire resets, sticky actions 0.25), which steps
  its envs in C++ threads, ``num_threads=0`` = one per core.
* ``plain gym.make loop`` - ``gym.make(id)`` stepped in a Python loop, ``reset()`` at episode end:
  what a gymnasium user writes. This is the baseline for the headline ratio. For Breakout it is
  ``gym.make("ALE/Breakout-v5", obs_type="grayscale")`` + ``FrameStackObservation(4)``: frameskip 4
  (ALE v5 default, done inside ALE), sticky actions 0.25, grayscale, 4 stacked frames - the same
  agent-step semantics as the factory minus the 84x84 resize and max-pool (gymnasium's
  ``AtariPreprocessing`` would add those but needs opencv, which is not installed).
* informative peers: gymnasium's ``SyncVectorEnv`` of N copies (``gym.make_vec(..., "sync")``);
  for Breakout the raw ``gym.make("ALE/Breakout-v5")`` (RGB 210x160, frameskip 4) and ale-py's
  ``AtariVectorEnv`` with the factory's settings but ``num_threads=1``, to separate threading from
  the native vector env.

Run from the repository root::

    python -m benchmarks.env_throughput            # default: about 2 minutes on 2 cores
    python -m benchmarks.env_throughput --write    # and update docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from . import _harness, _report

DEFAULT_ENVS = ("CartPole-v1", "ALE/Breakout-v5", "HalfCheetah-v5")
# Agent steps per measurement, sized so that each measurement takes roughly 1-4 s on a slow core.
DEFAULT_STEPS = {"CartPole-v1": 100_000, "ALE/Breakout-v5": 5_000, "HalfCheetah-v5": 20_000}
FALLBACK_STEPS = 20_000
WARMUP_VECTOR_STEPS = 16
FRAMES_PER_STEP = {
    "CartPole-v1": "1 (no frameskip)",
    "ALE/Breakout-v5": "4 emulator frames",
    "HalfCheetah-v5": "5 MuJoCo substeps (frame_skip=5)",
}


@dataclass
class Contender:
    name: str
    build: Callable[[], object]
    vector: bool  # steps a batch of num_envs actions per call
    num_envs: int
    parallelism: str
    baseline: bool = False
    factory: bool = False


def _is_atari(env_id: str) -> bool:
    return env_id.startswith("ALE/")


def _register_ale() -> None:
    import ale_py

    gym.register_envs(ale_py)


def contenders_for(env_id: str, num_envs: int) -> list[Contender]:
    from frugalrl.config import EnvConfig
    from frugalrl.envs import make_vec_env

    out = [
        Contender(
            f"frugalrl make_vec_env ({num_envs} envs)",
            lambda: make_vec_env(EnvConfig(id=env_id, num_envs=num_envs)),
            vector=True,
            num_envs=num_envs,
            parallelism=f"ale-py C++ threads, num_threads=0 (= {_report.nproc()} on this machine)"
            if _is_atari(env_id)
            else "1 Python thread (FastSyncVectorEnv)",
            factory=True,
        )
    ]
    if _is_atari(env_id):
        _register_ale()
        out.append(
            Contender(
                "plain gym.make loop, grayscale + FrameStackObservation(4) (1 env)",
                lambda: gym.wrappers.FrameStackObservation(gym.make(env_id, obs_type="grayscale"), 4),
                vector=False,
                num_envs=1,
                parallelism="1 thread",
                baseline=True,
            )
        )
        out.append(
            Contender(
                "plain gym.make loop, raw RGB 210x160 (1 env)",
                lambda: gym.make(env_id),
                vector=False,
                num_envs=1,
                parallelism="1 thread",
            )
        )

        def ale_one_thread():
            from frugalrl.config import EnvConfig
            from frugalrl.envs.factory import make_atari_vector_env

            return make_atari_vector_env(EnvConfig(id=env_id), num_envs, num_threads=1)

        out.append(
            Contender(
                f"ale-py AtariVectorEnv, factory settings, num_threads=1 ({num_envs} envs)",
                ale_one_thread,
                vector=True,
                num_envs=num_envs,
                parallelism="1 C++ thread",
            )
        )
    else:
        out.append(
            Contender(
                "plain gym.make loop (1 env)",
                lambda: gym.make(env_id),
                vector=False,
                num_envs=1,
                parallelism="1 thread",
                baseline=True,
            )
        )
        out.append(
            Contender(
                f"gymnasium SyncVectorEnv via gym.make_vec ({num_envs} envs)",
                lambda: gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync"),
                vector=True,
                num_envs=num_envs,
                parallelism="1 Python thread",
            )
        )
    return out


def random_actions(space: gym.Space, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` uniformly random actions of a single-env ``space``, generated up front."""
    if isinstance(space, gym.spaces.Discrete):
        return rng.integers(space.start, space.start + space.n, size=count, dtype=np.int64)
    if isinstance(space, gym.spaces.Box):
        return rng.uniform(space.low, space.high, size=(count, *space.shape)).astype(space.dtype)
    raise TypeError(f"unsupported action space {space}")


def measure(contender: Contender, steps: int, seed: int) -> tuple[float, int]:
    """Build, reset, warm up (untimed), then time ``steps`` agent steps; returns (steps/s, steps counted)."""
    env = contender.build()
    rng = np.random.default_rng(seed)
    try:
        env.reset(seed=seed)
        if contender.vector:
            n = contender.num_envs
            vector_steps = max(steps // n, 1)
            single = env.single_action_space
            warm = random_actions(single, WARMUP_VECTOR_STEPS * n, rng).reshape(WARMUP_VECTOR_STEPS, n, *single.shape)
            actions = random_actions(single, vector_steps * n, rng).reshape(vector_steps, n, *single.shape)
            for a in warm:
                env.step(a)
            step = env.step
            started = time.perf_counter()
            for a in actions:
                step(a)
            elapsed = time.perf_counter() - started
            counted = vector_steps * n
        else:
            space = env.action_space
            warm = random_actions(space, WARMUP_VECTOR_STEPS, rng)
            actions = random_actions(space, steps, rng)
            # Python ints / per-step arrays, as a user's policy would hand them over.
            warm_list = warm.tolist() if warm.ndim == 1 else list(warm)
            action_list = actions.tolist() if actions.ndim == 1 else list(actions)
            for a in warm_list:
                _, _, terminated, truncated, _ = env.step(a)
                if terminated or truncated:
                    env.reset()
            step, reset = env.step, env.reset
            started = time.perf_counter()
            for a in action_list:
                _, _, terminated, truncated, _ = step(a)
                if terminated or truncated:
                    reset()
            elapsed = time.perf_counter() - started
            counted = steps
    finally:
        env.close()
        del env
        gc.collect()
    return counted / elapsed, counted


def run(args: argparse.Namespace) -> list[dict]:
    """Measure every contender of every env (alternating within each repeat); one row per measurement."""
    torch.set_num_threads(1)
    common = _report.batch_common(repeats=args.repeats, num_envs=args.num_envs, seed=args.seed, nproc=_report.nproc())
    rows = []
    for env_id in args.envs:
        steps = args.steps or DEFAULT_STEPS.get(env_id, FALLBACK_STEPS)

        def one(job: tuple[int, Contender], env_id: str = env_id, steps: int = steps) -> dict:
            repeat, contender = job
            rate, n = measure(contender, steps, args.seed + repeat)
            role = "factory" if contender.factory else ("baseline" if contender.baseline else "informative")
            return dict(env_id=env_id, repeat=repeat, contender=contender.name, role=role,
                        parallelism=contender.parallelism, counted=n, rate=rate)  # fmt: skip

        def line(row: dict) -> str:
            return (f"{row['env_id']:18s} repeat {row['repeat'] + 1}/{args.repeats}  {row['contender']:70s} "
                    f"{row['rate']:12,.0f} steps/s")  # fmt: skip

        jobs = _harness.interleave(range(args.repeats), contenders_for(env_id, args.num_envs))
        rows += _harness.measure(jobs, one, args.results, common, line)
    return rows


def render(all_rows: list[dict], results: Path) -> str:
    sections = []
    summary_rows = []
    for env_id in dict.fromkeys(r["env_id"] for r in all_rows):
        env_rows = [r for r in all_rows if r["env_id"] == env_id]
        names = list(dict.fromkeys(r["contender"] for r in env_rows))
        rates = {name: [r["rate"] for r in sorted(env_rows, key=lambda r: r["repeat"]) if r["contender"] == name]
                 for name in names}  # fmt: skip
        info = {name: next(r for r in env_rows if r["contender"] == name) for name in names}
        factory = next(n for n in names if info[n]["role"] == "factory")
        baseline = next(n for n in names if info[n]["role"] == "baseline")
        rows = []
        for name in names:
            paired = _report.paired_ratio(zip(rates[factory], rates[name], strict=True)).per_seed
            role = {"baseline": "**baseline**"}.get(info[name]["role"], info[name]["role"])
            rows.append(
                [
                    name,
                    role,
                    info[name]["parallelism"],
                    f"{info[name]['counted']:,}",
                    _report.fmt_mmm(rates[name]),
                    "1" if name == factory else _report.fmt_mmm(paired, "{:.2f}"),
                ]
            )
        head = _report.paired_ratio(zip(rates[factory], rates[baseline], strict=True)).per_seed
        summary_rows.append(
            [
                env_id,
                FRAMES_PER_STEP.get(env_id, "see env"),
                _report.fmt_mmm(rates[factory]),
                _report.fmt_mmm(rates[baseline]),
                _report.fmt_mmm(head, "{:.2f}"),
            ]
        )
        table = _report.markdown_table(
            ["contender", "role", "parallelism", "agent steps timed", "steps/s median (min-max)", "factory / this"],
            rows,
        )
        sections.append(f"#### {env_id}\n\n{table}")

    summary = _report.markdown_table(
        [
            "env",
            "one agent step =",
            "frugalrl factory steps/s",
            "plain gymnasium loop steps/s",
            "factory / plain (paired per repeat)",
        ],
        summary_rows,
    )
    first = all_rows[0]
    lines = [
        *_report.rows_lines(all_rows, results),
        f"- repeats: {first['repeats']} (contenders alternate within each repeat; repeat r resets with seed "
        f"{first['seed']}+r and steps the same pre-generated random actions); vector envs: {first['num_envs']} copies",
        "- torch threads: 1. Ratios are the median (min-max) over repeats of factory / contender measured in "
        "the same repeat. Figures are medians (min-max) over repeats.",
        "- ALE: the factory's `AtariVectorEnv` uses `num_threads=0`, i.e. one C++ thread per core "
        f"({first['nproc']} here); every other contender is single-threaded. The 1-thread row shows the "
        "same vector env pinned to one thread. The Breakout baseline does no 84x84 resize or max-pool "
        "(opencv, needed by gymnasium's `AtariPreprocessing`, is not installed), so it does slightly less "
        "work per step than the factory.",
        "- Other processes may share the machine; see the load average.",
    ]
    return "\n".join(
        [
            "Env steps per second (higher is better), random actions, one agent step = one `env.step` of one env.",
            "",
            *lines,
            "",
            summary,
            "",
            "\n\n".join(sections),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=None, help="agent steps per measurement (default: per env)")
    parser.add_argument("--repeats", type=int, default=3, help="measurements per contender (>= 3 for a median)")
    parser.add_argument("--num-envs", type=int, default=8, help="copies in the vector envs")
    parser.add_argument("--envs", nargs="+", default=list(DEFAULT_ENVS), help="gymnasium env ids")
    parser.add_argument("--seed", type=int, default=0)
    _report.add_output_args(parser, "env_throughput")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    _report.run_or_render("env_throughput", args, run, render)


if __name__ == "__main__":
    main()
