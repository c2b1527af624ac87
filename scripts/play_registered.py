"""Play a registered frugalrl policy with plain MLflow and gymnasium: no frugalrl needed.

    python scripts/play_registered.py models:/cartpole-policy@champion --episodes 5

What a team that only consumes the registry runs. The env id comes from the version's
``frugalrl.env_id`` tag (or ``--env``); a ``module:EnvId`` of one's own env imports its module
(installed, or on PYTHONPATH), and ``--import MODULE`` imports one that registers a plain id; a
policy adapted to changed MuJoCo physics carries them in ``frugalrl.env_dynamics`` (mass and
friction scales, gravity), applied here to the stock env.
Episode i starts from seed ``--seed + i``, as frugalrl's evaluation does. Atari models take the
last 4 raw RGB screens (the model's signature says so) and make the grey 84x84 stack themselves;
this script keeps the state a stateless model cannot (4-frame skip with a max over the last two
screens, random no-ops after reset) and plays full games (all lives, ALE's sticky actions 0.25,
cut at ``--max-frames``), the protocol frugalrl evaluates with. FIRE is pressed after reset only for a
version tagged ``frugalrl.fire_reset=true`` (a policy trained with ``env.atari.fire_reset``); the
others learned to serve. Its scores match frugalrl's evaluation in distribution, not episode by
episode (ALE's sticky actions draw from their own generator; tests/test_atari_protocol.py checks
that the two agree within their intervals). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

import gymnasium as gym
import mlflow
import numpy as np


class Screens:
    """An ALE game as a frugalrl Atari model sees it: the last ``stack`` RGB screens the policy acted on.

    Each action is repeated ``skip`` frames and the screen kept is the max of the last two (flicker);
    a reset plays up to ``noop_max`` no-ops (seeded), then FIRE where the version asks for it.
    """

    def __init__(self, env: gym.Env, stack: int = 4, skip: int = 4, noop_max: int = 30, fire_reset: bool = False):
        self.env, self.stack, self.skip, self.noop_max = env, stack, skip, noop_max
        self.screens: list[np.ndarray] = []
        meanings = env.unwrapped.get_action_meanings()
        self.fire = meanings.index("FIRE") if fire_reset and "FIRE" in meanings else None

    def reset(self, seed: int) -> np.ndarray:
        screen, _ = self.env.reset(seed=seed)
        for _ in range(int(np.random.default_rng(seed).integers(0, self.noop_max + 1))):
            screen, _, terminated, truncated, _ = self.env.step(0)
            if terminated or truncated:
                screen, _ = self.env.reset()
        self.screens = [screen] * self.stack
        if self.fire is not None:
            return self.step(self.fire)[0]
        return np.stack(self.screens)

    def step(self, action: int) -> tuple[np.ndarray, float, bool]:
        raw, total, done = [], 0.0, False
        for _ in range(self.skip):
            screen, reward, terminated, truncated, _ = self.env.step(action)
            raw.append(screen)
            total, done = total + float(reward), terminated or truncated
            if done:
                break
        pooled = np.maximum(raw[-1], raw[-2]) if len(raw) > 1 else raw[-1]
        self.screens = [*self.screens[1:], pooled]
        return np.stack(self.screens), total, done


def with_dynamics(env: gym.Env, dynamics: dict) -> gym.Env:
    """The stock MuJoCo env with the version's changed physics (as frugalrl's ``env.dynamics`` does)."""
    model = env.unwrapped.model
    model.body_mass[:] *= dynamics.get("mass_scale", 1.0)
    model.body_inertia[:] *= dynamics.get("mass_scale", 1.0)
    model.geom_friction[:, 0] *= dynamics.get("friction_scale", 1.0)
    if dynamics.get("gravity") is not None:
        model.opt.gravity[:] = dynamics["gravity"]
    return env


def play(
    uri: str,
    env_id: str,
    episodes: int,
    seed: int,
    max_frames: int = 108_000,
    dynamics: dict | None = None,
    fire_reset: bool = False,
) -> list[float]:
    model = mlflow.pyfunc.load_model(uri)
    atari = env_id.startswith("ALE/")
    if atari:
        import ale_py

        gym.register_envs(ale_py)
    returns = []
    for i in range(episodes):
        if atari:
            stack = model.metadata.get_input_schema().inputs[0].shape[1]  # (n, stack, 210, 160, 3)
            raw = gym.make(env_id, frameskip=1, obs_type="rgb", max_num_frames_per_episode=max_frames)
            env = Screens(raw, stack=stack, fire_reset=fire_reset)
            obs, total, done = env.reset(seed + i), 0.0, False
            while not done:
                action = int(np.asarray(model.predict(obs[None]))[0])
                obs, reward, done = env.step(action)
                total += reward
            env.env.close()
        else:
            env = with_dynamics(gym.make(env_id), dynamics) if dynamics else gym.make(env_id)
            (obs, _), total, done = env.reset(seed=seed + i), 0.0, False
            while not done:
                action = np.asarray(model.predict(np.asarray(obs, dtype=np.float32)[None]))[0]
                if isinstance(env.action_space, gym.spaces.Discrete):
                    action = int(action)
                else:
                    action = np.clip(action, env.action_space.low, env.action_space.high)
                obs, reward, terminated, truncated, _ = env.step(action)
                total, done = total + float(reward), terminated or truncated
            env.close()
        returns.append(total)
    return returns


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("uri", help="models:/NAME@ALIAS or models:/NAME/VERSION")
    parser.add_argument("--env", help="gymnasium env id (default: the version's frugalrl.env_id tag)")
    parser.add_argument("--episodes", type=int, default=5)
    parser.add_argument("--seed", type=int, default=10_000)
    parser.add_argument("--max-frames", type=int, default=108_000, help="Atari: frames before an episode is cut")
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first (repeatable)",
    )
    args = parser.parse_args(argv)
    if args.episodes < 1 or args.max_frames < 1:
        parser.error("--episodes and --max-frames must be at least 1")  # one line, exit 2
    for module in args.imports:  # a MODULE:EnvId tag needs none: gym.make imports MODULE itself
        importlib.import_module(module)
    env_id, dynamics, fire_reset = args.env, None, False
    if env_id is None:
        name, _, ref = args.uri.removeprefix("models:/").partition("@")
        client = mlflow.MlflowClient()
        try:
            if ref:
                version = client.get_model_version_by_alias(name, ref)
            else:
                name, _, number = args.uri.removeprefix("models:/").partition("/")
                version = client.get_model_version(name, number)
        except mlflow.exceptions.MlflowException as exc:
            reason = str(exc).splitlines()[0][:200]
            print(f"error: {args.uri}: {reason}; check the name and alias in the MLflow UI, and "
                  "MLFLOW_TRACKING_URI", file=sys.stderr)  # fmt: skip
            return 2
        env_id = version.tags.get("frugalrl.env_id")
        dynamics = json.loads(version.tags.get("frugalrl.env_dynamics", "null"))
        fire_reset = version.tags.get("frugalrl.fire_reset") == "true"
        if not env_id:
            print(f"error: {args.uri} has no frugalrl.env_id tag; pass --env ENV_ID", file=sys.stderr)
            return 2
    returns = play(args.uri, env_id, args.episodes, args.seed, args.max_frames, dynamics, fire_reset)
    print(json.dumps({"uri": args.uri, "env_id": env_id, "returns": returns, "mean": float(np.mean(returns))}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
