"""A logged policy is a plain MLflow model: it loads and plays where frugalrl cannot be imported.

The subprocess blocks every ``import frugalrl``, loads the model with ``mlflow.pyfunc`` and
plays episode i from seed ``10000 + i`` with plain gymnasium; its returns must equal frugalrl's
own evaluation on the same seeds (same deterministic actions, same initial states).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request

import numpy as np
import pytest

from frugalrl.config import EnvConfig, validate_config
from frugalrl.evaluation import evaluate_policy
from frugalrl.nets.policy import ExportedPolicy
from frugalrl.policy_store import load_policy
from frugalrl.training import train

from .conftest import tiny_config
from .test_sac import sac_config

PLAY = """
import json, sys
sys.modules["frugalrl"] = None  # a Python without frugalrl: any import of it fails
import gymnasium as gym, mlflow, numpy as np

uri, env_id, episodes = sys.argv[1], sys.argv[2], int(sys.argv[3])
model = mlflow.pyfunc.load_model(uri)
returns = []
for i in range(episodes):
    env = gym.make(env_id)
    obs, _ = env.reset(seed=10_000 + i)
    total, done = 0.0, False
    while not done:
        action = np.asarray(model.predict(obs[None].astype(np.float32)))[0]
        if isinstance(env.action_space, gym.spaces.Discrete):
            action = int(action)
        obs, reward, terminated, truncated, _ = env.step(action)
        total, done = total + float(reward), terminated or truncated
    returns.append(total)
print(json.dumps({"returns": returns, "inputs": str(model.metadata.signature.inputs)}))
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "config",
    [
        tiny_config(tracking={"enabled": True}, ppo={"total_timesteps": 4096}),
        sac_config(tracking={"enabled": True}, env={"normalize_obs": False}),
    ],
    ids=["ppo-cartpole", "sac-pendulum"],
)
def test_a_logged_policy_loads_and_plays_without_frugalrl(config, tmp_path):
    summary = train(config, tmp_path / "run", interactive=False)
    uri = summary["model_uri"]
    ours = evaluate_policy(load_policy(uri), EnvConfig(id=config.env.id), episodes=3, seed=10_000).returns
    proc = subprocess.run(
        [sys.executable, "-c", PLAY, uri, config.env.id, "3"],
        capture_output=True, text=True, env={**os.environ}, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    played = json.loads(proc.stdout.strip().splitlines()[-1])
    assert played["returns"] == pytest.approx(ours, rel=1e-5)
    assert "float32" in played["inputs"]  # the model carries a signature


def test_frugalrl_loads_a_logged_policy_with_its_own_classes(tmp_path):
    from frugalrl.nets.policy import ActorCritic

    summary = train(tiny_config(tracking={"enabled": True}), tmp_path / "run", interactive=False)
    policy = load_policy(summary["model_uri"])
    assert type(policy) is ExportedPolicy and type(policy.actor_critic) is ActorCritic


def _registered(run_dir, name: str, episodes: int = 5) -> tuple[str, dict]:
    """The pipeline's evaluate and register steps on ``run_dir``: the registered version's URI and evaluation."""
    from frugalrl.ops.steps import evaluate_step, register_step

    evaluated = evaluate_step(str(run_dir), episodes, 10_000)
    registered = register_step(str(run_dir), name, evaluated["returns"], 10_000)
    return f"models:/{name}/{registered['version']}", evaluated


def _ci_overlap(returns: list[float], low: float, high: float) -> bool:
    """Whether the bootstrap 95% interval of ``returns``'s mean overlaps [low, high]."""
    from frugalrl.stats import bootstrap_ci

    played_low, played_high = bootstrap_ci(returns)
    return played_low <= high and low <= played_high


@pytest.mark.slow
def test_each_branchs_registered_policy_plays_with_plain_mlflow_and_gymnasium(tmp_path):
    """The demo's three kinds of registered policy, through the pipeline's own register step, played
    by ``scripts/play_registered.py`` in a Python where neither frugalrl nor peft can be imported:
    CartPole PPO, an InvertedPendulum policy adapted with LoRA (peft's layers merged on logging),
    and the latent Breakout policy, which takes raw stacked frames."""
    from frugalrl.config import load_config

    from .conftest import REPO
    from .test_latent import breakout

    cartpole = tmp_path / "cartpole"
    train(tiny_config(name="plain-cartpole", tracking={"enabled": True}, ppo={"total_timesteps": 8192}), cartpole)
    peft = tmp_path / "peft"
    overrides = ["sac.total_timesteps=300", "sac.learning_starts=100", "sac.batch_size=32", "peft.steps=120",
                 "peft.warmup_steps=60", "peft.eval_episodes=1", "tracking.enabled=true",
                 "peft.methods={full: {}, lora: {rank: 4}}", "peft.references=[scratch]"]  # fmt: skip
    from frugalrl.peft.compare import compare

    compared = compare(load_config(REPO / "configs" / "peft-quick.yaml", overrides), peft)
    # the only parameter-efficient method, and no untouched source to lose to: best/ holds peft's layers
    assert compared["best_method"] == compared["best_policy_method"] == "lora"
    latent = tmp_path / "latent"
    data = breakout().to_dict()
    data["tracking"]["enabled"], data["env"]["atari"] = True, {"max_episode_steps": 2000}
    train(validate_config(data, source="test"), latent)

    played = {}
    for run, name, episodes in ((cartpole, "plain-cartpole", 5), (peft / "best", "plain-adapted", 3),
                                (latent, "plain-breakout", 3)):  # fmt: skip
        uri, evaluated = _registered(run, name, episodes)
        block = "import sys, runpy; sys.modules['frugalrl'] = None; sys.modules['peft'] = None; "
        block += f"sys.argv = ['play', {uri!r}, '--episodes', '{episodes}', '--max-frames', '2000']; "
        block += f"runpy.run_path({str(REPO / 'scripts' / 'play_registered.py')!r}, run_name='__main__')"
        proc = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        played[name] = (json.loads(proc.stdout.strip().splitlines()[-1])["returns"], evaluated)

    for name in ("plain-cartpole", "plain-adapted"):  # deterministic policy, same seeds: the same episodes
        returns, evaluated = played[name]
        assert returns == pytest.approx(evaluated["returns"], rel=1e-4), name
    returns, evaluated = played["plain-breakout"]  # sticky actions and another resize: the same distribution
    assert _ci_overlap(returns, evaluated["eval_ci_low"], evaluated["eval_ci_high"]), (returns, evaluated)

    from frugalrl.tracking.registry import registry_client

    client = registry_client()
    for name in ("plain-cartpole", "plain-adapted", "plain-breakout"):  # a card a plain client can read
        version = client.get_model_version(name, "1")
        assert version.tags["frugalrl.eval_protocol"].startswith("mean return of") and version.tags["frugalrl.input"]
        assert version.tags["frugalrl.env_id"] in version.description and "Input:" in version.description
    assert "RGB screens" in client.get_model_version("plain-breakout", "1").tags["frugalrl.input"]
    _served_over_rest_acts_as_in_process("models:/plain-breakout/1", tmp_path)


def _raw_screens(env_id: str, batch: int, stack: int = 4) -> np.ndarray:
    """``batch`` stacks of ``stack`` raw RGB ALE screens from random play, (batch, stack, 210, 160, 3) uint8."""
    import ale_py
    import gymnasium as gym

    gym.register_envs(ale_py)
    env = gym.make(env_id, obs_type="rgb")
    rng = np.random.default_rng(0)
    screens, _ = env.reset(seed=1)
    seen = [screens]
    for _ in range(batch * stack + 20):
        screen, _, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
        seen.append(env.reset()[0] if terminated or truncated else screen)
    env.close()
    return np.stack([np.stack(seen[20 + i * stack : 20 + (i + 1) * stack]) for i in range(batch)])


def _served_over_rest_acts_as_in_process(uri: str, tmp_path) -> None:
    """``mlflow models serve`` of ``uri`` (frugalrl not importable in the server) answers raw screens over REST
    with the actions frugalrl's own policy takes on the same screens made grey, resized and stacked."""
    import torch

    from frugalrl.nets.screens import ScreenPolicy
    from frugalrl.tracking.models import screen_input

    from .conftest import _free_port, wait_until_up

    blocked = tmp_path / "blocked" / "frugalrl"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('frugalrl is not installed here')\n")
    port, log = _free_port(), tmp_path / "serve.log"
    bin_dir = os.path.dirname(sys.executable)  # mlflow starts uvicorn from PATH: the venv's, as once activated
    env = {**os.environ, "PYTHONPATH": str(blocked.parent), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    with log.open("w") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "models", "serve", "-m", uri, "--env-manager", "local",
             "--host", "127.0.0.1", "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
        try:
            wait_until_up(f"http://127.0.0.1:{port}/ping", lambda: server.poll() is not None, log.read_text,
                          "mlflow models serve")  # fmt: skip
            screens = _raw_screens("ALE/Breakout-v5", batch=3)
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/invocations", json.dumps({"inputs": screens.tolist()}).encode(),
                {"Content-Type": "application/json"},
            )  # fmt: skip
            served = json.loads(urllib.request.urlopen(request, timeout=60).read())["predictions"]
        finally:
            server.terminate()
            server.wait(timeout=30)
    policy = load_policy(uri)
    stack, size, _ = screen_input(policy.spec["env"])
    assert screens.shape[1] == stack
    stacks = ScreenPolicy(policy, size).stack(torch.as_tensor(screens)).numpy()
    assert served == policy.predict(stacks).tolist(), log.read_text()[-2000:]
