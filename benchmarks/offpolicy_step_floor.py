"""Where an off-policy gradient step's time goes: its matrix multiplications against everything else, frugalrl
and Stable-Baselines3 side by side, and what that leaves for a faster step at the same arithmetic.

For each env of ``offpolicy_vs_sb3`` (the same config, the same SB3 settings through ``_offpolicy``), one
process, one torch thread:

1. Both learners fill their replay with the same number of env steps (``--fill``; acting only, no learning).
2. One learning call of each (frugalrl ``learner.learn()``, SB3 ``model.train(gradient_steps, batch_size)``:
   the config's ``gradient_steps`` at its ``batch_size``) runs under a dispatch mode that records every matrix
   multiplication (``mm``, ``addmm``, ``bmm``, ``baddbmm``) with its operands' shapes and strides; its FLOPs
   are the cost meter's count (``frugalrl.cost.count_flops``: 2 m k n per product).
3. Timed in alternating blocks (A B C D A B C D ...), after a warm-up: each learner's learning call, and a
   replay of the recorded matrix multiplications alone on random operands of the same shapes and strides
   (outputs allocated as in the real call). Medians over the blocks, per gradient step. frugalrl's autograd
   step (``dqn.fused_step=false`` / ``sac.fused_step=false``, the reference its written-out step replaced) is
   timed in the same blocks.

The replay is the time the step's matrix products take on this core with torch's CPU kernels: a step that did
nothing else would take that long. "Rest" is the step minus it: elementwise work, reductions, the optimizer,
replay sampling, autograd and Python. ``matmul floor / SB3 step`` is the lowest frugalrl / SB3 step-time
ratio reachable without changing the arithmetic (or the kernels). The whole-run ratio in ``offpolicy_vs_sb3``
also holds env steps and acting, which this leaves out.

    python -m benchmarks.offpolicy_step_floor --write        # about 4 minutes
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import _harness, _report
from ._offpolicy import ENVS, EnvSpec, frugalrl_overrides, sb3_settings

NAME = "offpolicy_step_floor"
MATMULS = ("mm", "addmm", "bmm", "baddbmm")
# frugalrl's autograd step, the one its written-out step replaced
REFERENCE = {"dqn": "dqn.fused_step=false", "sac": "sac.fused_step=false"}


class MatmulLog:
    """The matrix multiplications a call makes: (op, operand layouts, keyword arguments), in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, list[Any], dict[str, Any]]] = []

    def record(self, fn: Callable[[], object]) -> None:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        calls = self.calls

        def layout(arg: Any) -> Any:
            if isinstance(arg, torch.Tensor):
                return ("tensor", tuple(arg.shape), tuple(arg.stride()), arg.dtype)
            return arg

        class Recorder(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
                kwargs = kwargs or {}
                if func.overloadpacket.__name__ in MATMULS:
                    calls.append((func, [layout(a) for a in args], dict(kwargs)))
                return func(*args, **kwargs)

        with Recorder():
            fn()

    def replay(self) -> Callable[[], None]:
        """A call that runs the recorded products on random operands of the recorded layouts."""
        import torch

        def operand(arg: Any) -> Any:
            if isinstance(arg, tuple) and arg and arg[0] == "tensor":
                _, shape, stride, dtype = arg
                # random values in a storage the recorded layout fits, viewed with that layout: an expanded
                # operand (stride 0, one input read by both twin critics) stays expanded
                size = 1 + sum((n - 1) * s for n, s in zip(shape, stride, strict=True) if n)
                return torch.empty(size, dtype=dtype).uniform_(-1, 1).as_strided(shape, stride)
            return arg

        calls = [(func, [operand(a) for a in args], kwargs) for func, args, kwargs in self.calls]

        def run() -> None:
            for func, args, kwargs in calls:
                func(*args, **kwargs)

        return run


def frugalrl_call(spec: EnvSpec, fill: int, *extra: str) -> tuple[Callable[[], object], int, int]:
    """frugalrl's learning call after ``fill`` env steps of acting, its gradient steps and batch size (``extra``:
    more overrides)."""
    import torch

    from frugalrl.config import load_config
    from frugalrl.cost import CostMeter
    from frugalrl.envs.factory import make_vec_env
    from frugalrl.learners import build_learner

    cfg = load_config(_report.REPO_ROOT / spec.config, [*frugalrl_overrides(spec, 1, spec.timesteps), *extra])
    hp = cfg.algo_config
    learner = build_learner(cfg, make_vec_env(cfg.env, gamma=hp.gamma), CostMeter(), torch.device("cpu"))
    learner.start(cfg.seed)
    while learner.global_step < fill:
        learner.collect()
    return learner.learn, hp.gradient_steps, hp.batch_size


def sb3_call(spec: EnvSpec, fill: int) -> Callable[[], object]:
    """SB3's learning call (``train``) after ``fill`` env steps of its own acting, the same settings."""
    import stable_baselines3
    from stable_baselines3.common.env_util import make_vec_env

    from frugalrl.config import load_config

    cfg = load_config(_report.REPO_ROOT / spec.config, frugalrl_overrides(spec, 1, spec.timesteps))
    algo, kwargs, _ = sb3_settings(cfg)
    kwargs["learning_starts"] = fill + 1  # .learn(fill) only acts
    env = make_vec_env(spec.env_id, n_envs=cfg.env.num_envs, seed=1)
    model = getattr(stable_baselines3, algo)("MlpPolicy", env, seed=1, device="cpu", **kwargs)
    model.learn(fill)
    hp = cfg.algo_config
    return lambda: model.train(gradient_steps=hp.gradient_steps, batch_size=hp.batch_size)


def seconds_per_call(fn: Callable[[], object], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - started) / calls


def measure_env(spec: EnvSpec, fill: int, blocks: int, block_s: float) -> dict:
    import torch

    from frugalrl.cost import count_flops

    torch.set_num_threads(1)
    fr_learn, gradient_steps, batch_size = frugalrl_call(spec, fill)
    sb_learn = sb3_call(spec, fill)
    logs = {"frugalrl": MatmulLog(), "sb3": MatmulLog()}
    logs["frugalrl"].record(fr_learn)
    logs["sb3"].record(sb_learn)
    flops = {"frugalrl": count_flops(fr_learn)[0], "sb3": count_flops(sb_learn)[0]}
    fns = {"frugalrl": fr_learn, "sb3": sb_learn, "frugalrl matmuls": logs["frugalrl"].replay(),
           "sb3 matmuls": logs["sb3"].replay()}  # fmt: skip
    if spec.algo in REFERENCE:
        fns["frugalrl reference"] = frugalrl_call(spec, fill, REFERENCE[spec.algo])[0]
    calls = {}
    for name, fn in fns.items():  # warm-up, and how many calls fill a block
        calls[name] = max(1, round(block_s / seconds_per_call(fn, 3)))
    per_step: dict[str, list[float]] = {name: [] for name in fns}
    for _, name in _harness.interleave(range(blocks), list(fns)):
        per_step[name].append(1e3 * seconds_per_call(fns[name], calls[name]) / gradient_steps)
    ms = {name: statistics.median(values) for name, values in per_step.items()}
    return {
        "env": spec.env_id, "algo": spec.algo, "config": spec.config, "gradient_steps": gradient_steps,
        "batch_size": batch_size, "fill": fill, "blocks": blocks, "torch_threads": torch.get_num_threads(),
        "frugalrl_ms": ms["frugalrl"], "sb3_ms": ms["sb3"],
        "frugalrl_matmul_ms": ms["frugalrl matmuls"], "sb3_matmul_ms": ms["sb3 matmuls"],
        "reference": REFERENCE.get(spec.algo), "reference_ms": ms.get("frugalrl reference"),
        "frugalrl_matmuls": len(logs["frugalrl"].calls) // gradient_steps,
        "sb3_matmuls": len(logs["sb3"].calls) // gradient_steps,
        "frugalrl_gflop": flops["frugalrl"] / gradient_steps / 1e9,
        "sb3_gflop": flops["sb3"] / gradient_steps / 1e9,
        "ms_per_block": {name: values for name, values in per_step.items()},
    }  # fmt: skip


def run(args: argparse.Namespace) -> list[dict]:
    common = _report.batch_common(fill=args.fill, blocks=args.blocks)

    def line(r: dict) -> str:
        return (f"{r['env']:<15} frugalrl {r['frugalrl_ms']:.2f} ms/step (matmuls {r['frugalrl_matmul_ms']:.2f}), "
                f"SB3 {r['sb3_ms']:.2f} (matmuls {r['sb3_matmul_ms']:.2f})")  # fmt: skip

    specs = [ENVS[e] for e in args.env]
    return _harness.measure(specs, lambda s: measure_env(s, args.fill, args.blocks, args.block_s), args.results,
                            common, line)  # fmt: skip


def render(rows: list[dict], results: Path) -> str:
    header = ["env (algo, batch)", "learner", "ms per gradient step", "matrix products: ms (count, GFLOP)",
              "rest, ms", "products' GFLOP/s", "step / SB3's step"]  # fmt: skip
    body, floors = [], []
    for r in rows:
        env = f"{r['env']} ({r['algo'].upper()}, {r['batch_size']})"
        for side, label in (("frugalrl", "frugalrl"), ("sb3", "Stable-Baselines3")):
            step, mm = r[f"{side}_ms"], r[f"{side}_matmul_ms"]
            gflop = r[f"{side}_gflop"]
            body.append([
                env, label, f"{step:.2f}", f"{mm:.2f} ({r[f'{side}_matmuls']}, {gflop:.3f})", f"{step - mm:.2f}",
                f"{gflop / mm * 1e3:.1f}", f"{step / r['sb3_ms']:.2f}",
            ])  # fmt: skip
        if r.get("reference_ms") is not None:  # the same products as frugalrl's row
            step = r["reference_ms"]
            body.append([env, f"frugalrl, `{r['reference']}`", f"{step:.2f}", "as frugalrl's",
                         f"{step - r['frugalrl_matmul_ms']:.2f}", "-", f"{step / r['sb3_ms']:.2f}"])  # fmt: skip
        before = (f" (with `{r['reference']}`: {r['reference_ms'] / r['sb3_ms']:.2f})"
                  if r.get("reference_ms") is not None else "")  # fmt: skip
        floors.append(
            f"- {r['env']}: frugalrl's products alone take {r['frugalrl_matmul_ms'] / r['sb3_ms']:.2f} of SB3's "
            f"step (frugalrl's rest is {r['frugalrl_ms'] - r['frugalrl_matmul_ms']:.2f} ms, SB3's "
            f"{r['sb3_ms'] - r['sb3_matmul_ms']:.2f} ms); the step now takes {r['frugalrl_ms'] / r['sb3_ms']:.2f}"
            f"{before}."
        )
    blocks = rows[0].get("blocks", 7)
    lines = [
        "One gradient step of each learner, split into its matrix products and the rest (the script's docstring "
        f"says how). Medians of {blocks} alternating blocks per figure; one torch thread; replay filled with "
        f"{rows[0]['fill']:,} env steps of acting.",
        "",
        *_report.rows_lines(rows, results),
        "",
        "The lowest step-time ratio frugalrl / SB3 at this arithmetic (frugalrl's products alone against SB3's "
        "whole step):",
        "",
        *floors,
        "",
        _report.markdown_table(header, body),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", nargs="+", choices=list(ENVS), default=list(ENVS))
    parser.add_argument("--fill", type=int, default=5_000, help="env steps of acting before the timing")
    parser.add_argument("--blocks", type=int, default=7)
    parser.add_argument("--block-s", type=float, default=1.0, help="seconds per timed block (about)")
    _report.add_output_args(parser, NAME)
    args = parser.parse_args()
    _report.run_or_render(NAME, args, run, render, after=("offpolicy_vs_sb3_lunarlander",))


if __name__ == "__main__":
    main()
