"""CPU time per million Atari agent steps: the latent policy's pieces, pixel PPO, and the peers users pick.

What a million agent steps (4M frames at frame-skip 4) cost in CPU-minutes, on one torch thread,
for each contender, measured side by side (A B C ... A B C ..., each in a fresh process, the first
update of each left out as warm-up):

- ``env``          frugalrl's Atari vector env alone (ale-py's ``AtariVectorEnv`` with the life-loss
                   signal, episode statistics and reward clipping on top), random actions;
- ``envpool``      envpool's Atari env alone, the same preprocessing (only where envpool is installed:
                   ``pip install envpool``; its row says "not installed" otherwise);
- ``encode``       the frozen encoder over a batch of frame stacks, as the module runs it;
- ``encode_graph`` the same as a frozen TorchScript graph with oneDNN-prepacked convolutions
                   (``torch.jit.optimize_for_inference``): tried as a cut of the encoding cost, same
                   latents; it measured no faster on this host, so ``EncodedVectorEnv`` runs the module;
- ``latent``       the latent policy, 100% real, on a frozen encoder (``configs/atari100k-latent.yaml``):
                   env + encoding + acting + PPO updates, with the meter's breakdown;
- ``pixel``        frugalrl's pixel PPO (``configs/atari100k-ppo.yaml``, CleanRL's ``ppo_atari.py``
                   settings: 8 envs x 128 steps, 4 epochs, minibatch 256);
- ``sb3``          Stable-Baselines3's PPO with RL Zoo's Atari hyperparameters (8 envs, n_steps 128,
                   n_epochs 4, batch 256, lr 2.5e-4 and clip 0.1 linearly annealed, ent 0.01, vf 0.5),
                   ``AtariWrapper`` + ``VecFrameStack(4)`` on the same game with sticky actions 0.25,
                   run as its users run it (``make_atari_env``, a ``DummyVecEnv``).

Every contender steps the same game (``--game``) with ``--envs`` games where the contender has a
choice. The encoder is freshly initialised unless ``--encoder`` names a trained one: the cost of a
pass does not depend on the weights.

    python -m benchmarks.atari_throughput --game ALE/Breakout-v5 --steps 32768 --repeats 3 --write
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from . import _harness, _report

CONTENDERS = ("env", "envpool", "encode", "encode_graph", "latent", "pixel", "sb3")
PER_MILLION = 1e6 / 60.0  # CPU-seconds per step -> CPU-minutes per million steps


def _cpu() -> float:
    return time.process_time()  # the whole process, every thread (ale-py steps games in C++ threads)


def _config(name: str, game: str, envs: int, extra: list[str] = ()):  # noqa: ANN202
    from frugalrl.config import load_config

    overrides = [f"env.id={game}", f"env.num_envs={envs}", "tracking.enabled=false", "threads=1", *extra]
    return load_config(_report.REPO_ROOT / "configs" / name, overrides)


def _updates(agent, meter, steps: int) -> tuple[float, float, int, dict[str, float]]:  # noqa: ANN001
    """One warm-up update, then updates until ``steps`` more agent steps: CPU s, wall s, steps and the
    meter's phase seconds over those updates."""
    agent.run_update()
    first, cpu, wall, before = agent.global_step, _cpu(), time.perf_counter(), dict(meter.seconds)
    while agent.global_step - first < steps:
        agent.run_update()
    phases = {k: meter.seconds.get(k, 0.0) - before.get(k, 0.0) for k in meter.seconds}
    return _cpu() - cpu, time.perf_counter() - wall, agent.global_step - first, phases


def _random_steps(env, steps: int, actions: int, envs: int) -> tuple[float, float, int]:  # noqa: ANN001
    import numpy as np

    rng = np.random.default_rng(0)
    env.reset(seed=1)
    for _ in range(8):
        env.step(rng.integers(0, actions, envs))
    cpu, wall = _cpu(), time.perf_counter()
    for _ in range(steps // envs):
        env.step(rng.integers(0, actions, envs))
    return _cpu() - cpu, time.perf_counter() - wall, steps // envs * envs


def _encoder(path: str | None):  # noqa: ANN202
    from frugalrl.latent.encoder import FrameEncoder
    from frugalrl.latent.store import load_latent

    return load_latent(path).encoder if path else FrameEncoder(4, 84, 32)


def worker(kind: str, args: argparse.Namespace) -> dict:
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    game, envs, steps = args.game, args.envs, args.steps
    breakdown: dict[str, float] = {}
    if kind == "env":
        from frugalrl.envs.factory import make_vec_env

        env = make_vec_env(_config("atari100k-ppo.yaml", game, envs).env)
        cpu, wall, done = _random_steps(env, steps, int(env.single_action_space.n), envs)
    elif kind == "envpool":
        try:
            import envpool
        except ImportError:
            return {"skipped": "envpool is not installed (pip install envpool)"}
        env = envpool.make(game.split("/")[-1], env_type="gymnasium", num_envs=envs, batch_size=envs,
                           num_threads=1, episodic_life=False, reward_clip=False, repeat_action_probability=0.25,
                           noop_max=30, stack_num=4, img_height=84, img_width=84, frame_skip=4,
                           max_episode_steps=27_000, use_fire_reset=False)  # fmt: skip
        cpu, wall, done = _random_steps(env, steps, int(env.action_space.n), envs)
    elif kind in ("encode", "encode_graph"):
        encoder = _encoder(args.encoder).eval().requires_grad_(False)
        frames = torch.randint(0, 256, (envs, 4, 84, 84), dtype=torch.uint8)
        run = encoder
        if kind == "encode_graph":
            with torch.no_grad():
                run = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.trace(encoder, frames)))
        with torch.no_grad():
            for _ in range(8):
                run(frames)
            cpu, wall = _cpu(), time.perf_counter()
            for _ in range(steps // envs):
                run(frames)
        cpu, wall, done = _cpu() - cpu, time.perf_counter() - wall, steps // envs * envs
    elif kind == "latent":
        from frugalrl.cost import CostMeter
        from frugalrl.latent.encoder import FrameDecoder
        from frugalrl.latent.store import LatentModels, save_latent
        from frugalrl.latent.train import LatentCurriculum
        from frugalrl.latent.world_model import LatentWorldModel

        with tempfile.TemporaryDirectory(prefix="atari-throughput-") as tmp:
            path = args.encoder
            if path is None:  # a fresh encoder with this game's head: the same passes as a trained one
                encoder = _encoder(None)
                from frugalrl.envs.registry import ale_game_name  # noqa: F401  (the game must exist)

                models = LatentModels(encoder, FrameDecoder(encoder), LatentWorldModel(32, 18, [256, 256]),
                                      {"env_id": game, "games": [game], "pretrain_flops": 0.0})  # fmt: skip
                models.heads = {game: models.world_model}
                path = str(Path(tmp) / "encoder.pt")
                save_latent(Path(path), models)
            stages = "[{virtual_fraction: 0.0, real_share: 1.0}]"
            config = _config("atari100k-latent.yaml", game, envs, [f"latent.encoder_from={path}",
                             f"latent.curriculum.stages={stages}", f"total_real_steps={10 * steps}"])  # fmt: skip
            meter = CostMeter()
            learner = LatentCurriculum(config, Path(tmp) / "run", meter, torch.device("cpu"))
            learner.start(1)
            cpu, wall, done, breakdown = _updates(learner, meter, steps)
    elif kind == "pixel":
        from frugalrl.algos.ppo import PPO
        from frugalrl.cost import CostMeter
        from frugalrl.envs.factory import make_vec_env

        config = _config("atari100k-ppo.yaml", game, envs, ["device=cpu"])
        meter = CostMeter()
        agent = PPO(config, make_vec_env(config.env, gamma=config.ppo.gamma), meter, torch.device("cpu"))
        agent.start(1)
        cpu, wall, done, breakdown = _updates(agent, meter, steps)
    elif kind == "sb3":
        import ale_py
        import gymnasium as gym
        from stable_baselines3 import PPO as SB3PPO
        from stable_baselines3.common.env_util import make_atari_env
        from stable_baselines3.common.vec_env import VecFrameStack

        gym.register_envs(ale_py)
        env = VecFrameStack(make_atari_env(game, n_envs=envs, seed=1, env_kwargs={
            "frameskip": 1, "repeat_action_probability": 0.25, "full_action_space": False}), n_stack=4)  # fmt: skip
        model = SB3PPO("CnnPolicy", env, n_steps=128, n_epochs=4, batch_size=256, learning_rate=lambda f: 2.5e-4 * f,
                       clip_range=lambda f: 0.1 * f, ent_coef=0.01, vf_coef=0.5, device="cpu", seed=1,
                       policy_kwargs={"normalize_images": True})  # fmt: skip
        model.learn(128 * envs)  # warm-up update
        cpu, wall = _cpu(), time.perf_counter()
        model.learn(steps, reset_num_timesteps=False)
        cpu, wall, done = _cpu() - cpu, time.perf_counter() - wall, steps
    else:
        raise ValueError(kind)
    return {"cpu_s": cpu, "wall_s": wall, "steps": done, "breakdown_s": breakdown, "torch_threads": 1}


def run(args: argparse.Namespace) -> list[dict]:
    common = _report.batch_common(game=args.game, envs=args.envs, steps=args.steps,
                                  encoder=args.encoder or "fresh")  # fmt: skip

    def one(job: tuple[int, str]) -> dict:
        repeat, kind = job
        worker_args = ["--worker", kind, "--game", args.game, "--envs", args.envs, "--steps", args.steps,
                       *(["--encoder", args.encoder] if args.encoder else [])]  # fmt: skip
        return {"contender": kind, "repeat": repeat, **_harness.worker(__spec__.name, worker_args)}

    def line(row: dict) -> str:
        return f"{row['contender']:>12} repeat {row['repeat']}: {_cpu_min(row)}"

    # alternating: every repeat runs every contender once, in turn
    jobs = _harness.interleave(range(args.repeats), args.contenders)
    return _harness.measure(jobs, one, args.results, common, line)


def _cpu_min(row: dict) -> str:
    return row["skipped"] if "skipped" in row else f"{row['cpu_s'] / row['steps'] * PER_MILLION:.1f} CPU-min / 1M"


def render(rows: list[dict], results: Path) -> str:
    by: dict[str, list[dict]] = {}
    for row in rows:
        by.setdefault(row["contender"], []).append(row)
    first = rows[0]
    lines = [
        f"{first['game']}, {first['envs']} games per vector env, {first['steps']:,} agent steps per measurement "
        f"after one warm-up update, {len(by.get('env', []))} repeats, one torch thread; the encoder: "
        f"{first['encoder']}. CPU-minutes per million agent steps (4M frames): median [min, max].",
        "",
    ]
    table, medians = [], {}
    for kind in CONTENDERS:
        mine = by.get(kind)
        if not mine:
            continue
        if "skipped" in mine[0]:
            table.append([kind, mine[0]["skipped"], "-", "-"])
            continue
        cpu = [r["cpu_s"] / r["steps"] * PER_MILLION for r in mine]
        wall = [r["wall_s"] / r["steps"] * PER_MILLION for r in mine]
        medians[kind] = statistics.median(cpu)
        table.append([kind, _report.fmt_mmm(cpu, "{:.1f}"), _report.fmt_mmm(wall, "{:.1f}"),
                      f"{statistics.median(r['steps'] / r['cpu_s'] for r in mine):,.0f}"])  # fmt: skip
    lines.append(_report.markdown_table(["contender", "CPU-min / 1M steps", "wall-min / 1M steps",
                                         "agent steps per CPU-s"], table))  # fmt: skip
    for kind in ("latent", "pixel"):
        mine = [r for r in by.get(kind, []) if r.get("breakdown_s")]
        if not mine:
            continue
        phases = sorted({p for r in mine for p in r["breakdown_s"]})
        parts = []
        for phase in phases:
            share = statistics.median(r["breakdown_s"].get(phase, 0.0) / r["wall_s"] for r in mine)
            parts.append(f"{phase} {share:.0%}")
        inside = " (`env` includes encoding the frames)" if kind == "latent" else ""
        lines += ["", f"Where `{kind}`'s time goes (the meter's phase timers, share of wall-clock{inside}): "
                  f"{', '.join(parts)}."]  # fmt: skip

    def per_step(kind: str) -> dict[int, float]:
        return {r["repeat"]: r["cpu_s"] / r["steps"] for r in by.get(kind, []) if "cpu_s" in r}

    def per_million(kind: str) -> list[float]:
        return [r["cpu_s"] / r["steps"] * PER_MILLION for r in by[kind]]

    ratios = []
    for a, b, name in (
        ("latent", "pixel", "latent / pixel"),
        ("pixel", "sb3", "frugalrl pixel / SB3"),
        ("encode_graph", "encode", "encoder graph / module"),
        ("latent", "env", "latent / env alone"),
    ):
        if a in medians and b in medians:
            paired = _report.paired_ratio(
                _report.pair_up(per_step(a), per_step(b)), medians=(per_million(a), per_million(b))
            )
            ratios.append(f"{name} {paired.of_medians:.2f}x ({paired.median:.2f}x)")
    if ratios:
        lines += ["", "CPU-time ratios, ratio of medians (median of per-repeat ratios): " + "; ".join(ratios) + "."]
    if "latent" in medians:  # issue 31's target for the frozen-encoder latent policy
        verdict = "met" if medians["latent"] <= 15.0 else "missed"
        floor = f"; the env alone takes {medians['env']:.1f} here" if "env" in medians else ""
        lines += ["", f"Target: the latent policy at most 15 CPU-minutes per million agent steps: {verdict} "
                  f"({medians['latent']:.1f}{floor})."]  # fmt: skip
    if "pixel" in medians and "sb3" in medians:
        verdict = "met" if medians["pixel"] <= medians["sb3"] else "missed"
        lines += [f"Target: frugalrl's pixel PPO at least as fast as SB3 with RL Zoo's settings: {verdict}."]
    lines += ["", *_report.rows_lines(rows, results)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="ALE/Breakout-v5")
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=32_768, help="agent steps measured per contender and repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--contenders", nargs="+", default=list(CONTENDERS), choices=CONTENDERS)
    parser.add_argument("--encoder", help="a trained encoder.pt (default: a freshly initialised one)")
    parser.add_argument("--worker", choices=CONTENDERS, help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    _report.add_output_args(parser, "atari_throughput")
    args = parser.parse_args()
    if args.worker:
        _harness.write_result(worker(args.worker, args), args.result)
        return
    _report.run_or_render("atari_throughput", args, run, render)


if __name__ == "__main__":
    main()
