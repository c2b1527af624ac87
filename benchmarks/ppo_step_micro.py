"""Microseconds per call of the pieces of a CartPole PPO step: what each change in the fast path replaced.

Each line times the replaced piece and its replacement in the same process, alternating blocks of
calls (A B A B ...), one torch thread, after a warm-up; medians over the blocks. Shapes are CartPole's
RL Zoo ones: a 64x64 tanh actor-critic (separate towers), minibatch 256, 8 envs.

    python -m benchmarks.ppo_step_micro --write      # about 1 minute
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from . import _harness, _report


def per_call_us(fn: Callable[[], object], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        fn()
    return 1e6 * (time.perf_counter() - started) / calls


def compare(old: Callable[[], object], new: Callable[[], object], calls: int, blocks: int) -> tuple[float, float]:
    for fn in (old, new):
        per_call_us(fn, calls // 4)
    us: dict[str, list[float]] = {"old": [], "new": []}
    for _, kind in _harness.interleave(range(blocks), ("old", "new")):  # A B A B: drift hits both alike
        us[kind].append(per_call_us(old if kind == "old" else new, calls))
    return statistics.median(us["old"]), statistics.median(us["new"])


def cases() -> list[tuple[str, str, str, Callable[[], object], Callable[[], object], int]]:
    import gymnasium as gym
    import numpy as np
    import torch

    from frugalrl.algos.fused_mlp import FusedMLPStep
    from frugalrl.algos.optim_step import ClipAndStep
    from frugalrl.algos.ppo_step import EagerStep, Minibatch
    from frugalrl.config import EnvConfig, PolicyConfig, PPOConfig
    from frugalrl.envs import make_vec_env
    from frugalrl.nets.policy import build_actor_critic

    torch.manual_seed(0)
    policy = build_actor_critic(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), PolicyConfig(hidden=[64, 64]))
    fused_policy = copy.deepcopy(policy)
    hp = PPOConfig()
    k = 256
    mb = Minibatch(
        torch.randn(k, 4), torch.randint(0, 2, (k,)), torch.full((k,), -0.69), torch.randn(k), torch.randn(k),
        torch.randn(k), None, float(k),
    )  # fmt: skip
    eager, fused = EagerStep(policy, hp), FusedMLPStep(fused_policy, hp)

    def step_of(kind: EagerStep | FusedMLPStep) -> Callable[[], object]:
        params = list(kind.policy.parameters())

        def run() -> None:
            for p in params:
                p.grad = None
            kind.backward(kind.forward(mb, 0.2))

        return run

    params = list(policy.parameters())
    for p in params:
        p.grad = torch.randn_like(p)
    adam = torch.optim.Adam(params, lr=1e-3, eps=1e-5, fused=True)
    twin = [p.detach().clone().requires_grad_() for p in params]
    for p, q in zip(twin, params, strict=True):
        p.grad = q.grad.clone()
    direct = ClipAndStep(torch.optim.Adam(twin, lr=1e-3, eps=1e-5, fused=True), twin)
    direct.step(0.5)  # creates Adam's state

    def torch_clip_step() -> None:
        torch.nn.utils.clip_grad_norm_(params, 0.5)
        adam.step()

    obs8 = torch.randn(8, 4)
    x = torch.randn(256, 64)
    log_probs = torch.log_softmax(torch.randn(8, 2), -1)
    from frugalrl.nets.heads import CategoricalHead

    one_by_one = make_vec_env(EnvConfig(id="CartPole-v1", num_envs=8, batched=False))
    batched = make_vec_env(EnvConfig(id="CartPole-v1", num_envs=8))
    one_by_one.reset(seed=0)
    batched.reset(seed=0)
    actions = np.zeros(8, dtype=np.int64)

    def no_grad(fn: Callable[[], object]) -> Callable[[], object]:
        def run() -> object:
            with torch.inference_mode():
                return fn()

        return run

    return [
        ("minibatch step (forward + loss + backward)", "eager autograd", "hand-fused (`fused_mlp.py`)",
         step_of(eager), step_of(fused), 300),
        ("clip + Adam step", "`clip_grad_norm_` + `Adam(fused=True).step()`", "`ClipAndStep` (same kernels)",
         torch_clip_step, lambda: direct.step(0.5), 1000),
        ("acting, 8 envs", "`ActorCritic.act` (modules)", "fused NumPy forward", no_grad(lambda: policy.act(obs8)),
         no_grad(lambda: fused.act(obs8)), 1000),
        ("sample an action, 8 envs", "`torch.multinomial`", "inverse CDF (`CategoricalHead.sample`)",
         lambda: torch.multinomial(log_probs.exp(), 1), lambda: CategoricalHead.sample(log_probs), 2000),
        ("tanh on 256 x 64", "`torch.tanh`", "`2 * sigmoid(2x) - 1`", lambda: torch.tanh(x),
         lambda: torch.sigmoid(2 * x).mul_(2).sub_(1), 2000),
        ("step 8 CartPoles", "gymnasium envs one by one (`FastSyncVectorEnv`)", "`BatchedCartPole`",
         lambda: one_by_one.step(actions), lambda: batched.step(actions), 1000),
    ]  # fmt: skip


def run(args: argparse.Namespace) -> list[dict]:
    import torch

    torch.set_num_threads(1)

    def one(case: tuple) -> dict:
        name, old_name, new_name, old, new, calls = case
        old_us, new_us = compare(old, new, calls, args.blocks)
        return {"piece": name, "old": old_name, "new": new_name, "old_us": old_us, "new_us": new_us}

    def line(row: dict) -> str:
        return f"{row['piece']:45s} {row['old_us']:8.1f} us -> {row['new_us']:8.1f} us"

    return _harness.measure(cases(), one, args.results, _report.batch_common(blocks=args.blocks), line)


def render(rows: list[dict], results: Path) -> str:
    table = _report.markdown_table(
        ["piece", "before", "us per call", "now", "us per call", "ratio"],
        [[r["piece"], r["old"], f"{r['old_us']:.1f}", r["new"], f"{r['new_us']:.1f}",
          f"{r['new_us'] / r['old_us']:.2f}"] for r in rows],
    )  # fmt: skip
    blocks = f"Per call, median of {rows[0].get('blocks', 7)} alternating blocks:"
    return "\n".join([*_report.rows_lines(rows, results), "", blocks, "", table])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=7)
    _report.add_output_args(parser, "ppo_step_micro")
    args = parser.parse_args()
    _report.run_or_render("ppo_step_micro", args, run, render, after=("ppo_time_breakdown",))


if __name__ == "__main__":
    main()
