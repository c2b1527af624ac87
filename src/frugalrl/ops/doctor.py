"""``frugalrl check``: what works on this machine, and the fix for what does not."""

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from frugalrl.tracking.store import check_tracking, tracking_uri


@dataclass
class CheckResult:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def _step_env(env_id: str, steps: int = 50) -> str:
    # why here: each check imports what it checks, so a broken install fails that check, not doctor
    import gymnasium as gym

    from frugalrl.envs.registry import validate_env_id

    if not validate_env_id(env_id):
        raise RuntimeError(f"{env_id} is not registered")
    env = gym.make(env_id)
    env.reset(seed=0)
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    env.close()
    return f"{env_id} steps"


def _check_torch() -> str:
    import torch

    device = "cuda " + torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    return f"torch {torch.__version__}, device {device}, {torch.get_num_threads()} threads"


def _vec_env(env_id: str, num_envs: int) -> Any:
    """The factory's vector env of ``env_id``, the one the checks step."""
    # why here: each check imports what it checks, so a broken install fails that check, not doctor
    from frugalrl.config import EnvConfig
    from frugalrl.envs.factory import make_vec_env

    return make_vec_env(EnvConfig(id=env_id, num_envs=num_envs))


def _check_ale() -> str:
    # why here: each check imports what it checks, so a broken install fails that check, not doctor
    import ale_py

    env = _vec_env("ALE/Breakout-v5", 2)
    env.reset(seed=0)
    obs, *_ = env.step(np.zeros(2, dtype=np.int64))
    env.close()
    return f"ale-py {ale_py.__version__}: Breakout ROM loads, vector env steps, obs {tuple(obs.shape)}"


def _check_mujoco() -> str:
    import mujoco

    return f"mujoco {mujoco.__version__}: " + _step_env("HalfCheetah-v5")


def _check_box2d() -> str:
    return _step_env("LunarLander-v3")


def _check_mlflow() -> str:
    import mlflow

    uri = check_tracking(tracking_uri())
    if uri.startswith("sqlite:///"):
        # Probe a scratch store beside the real one: writable folder, working sqlite driver.
        with tempfile.TemporaryDirectory(dir=Path(uri.removeprefix("sqlite:///")).parent) as scratch:
            mlflow.set_tracking_uri(f"sqlite:///{scratch}/probe.db")
            mlflow.set_experiment("frugalrl-check")
            with mlflow.start_run():
                mlflow.log_metric("probe", 1.0)
            mlflow.set_tracking_uri(uri)
    return f"mlflow {mlflow.__version__}: {uri} writable"


def _check_kfp() -> str:
    try:
        import kfp
    except ModuleNotFoundError as exc:
        if exc.name != "kfp":
            raise
        # optional: a core install trains, tunes and tracks without it (pyproject.toml's pipelines extra)
        return "not installed: only the pipeline commands need it (pip install 'frugalrl[pipelines]')"
    from kfp import compiler, dsl

    @dsl.component(base_image="python:3.11", install_kfp_package=False)
    def probe(x: int) -> int:
        return x + 1

    @dsl.pipeline(name="frugalrl-check")
    def pipeline(x: int = 1):
        probe(x=x)

    with tempfile.TemporaryDirectory() as scratch:
        compiler.Compiler().compile(pipeline, f"{scratch}/p.yaml")
    return f"kfp {kfp.__version__}: compiles a pipeline"


def _probe_hardware() -> str:
    # why here: each check imports what it checks, so a broken install fails that check, not doctor
    import torch

    env = _vec_env("CartPole-v1", 8)
    env.reset(seed=0)
    actions = np.zeros(8, dtype=np.int64)
    start = time.perf_counter()
    for _ in range(500):
        env.step(actions)
    sps = 8 * 500 / (time.perf_counter() - start)
    a = torch.randn(512, 512)
    start = time.perf_counter()
    for _ in range(20):
        a @ a
    gflops = 20 * 2 * 512**3 / (time.perf_counter() - start) / 1e9
    return f"CartPole x8 {sps:,.0f} env steps/s; matmul 512^3 {gflops:.1f} GFLOP/s ({torch.get_num_threads()} threads)"


CHECKS: list[tuple[str, Callable[[], str], str]] = [
    ("torch", _check_torch, "pip install torch==2.13.0 (CPU) before `pip install -e .`"),
    ("ALE (Atari)", _check_ale, "pip install --force-reinstall ale-py (it ships its ROMs)"),
    ("MuJoCo", _check_mujoco, "pip install 'gymnasium[mujoco]' mujoco"),
    ("Box2D", _check_box2d, "pip install 'gymnasium[box2d]' (needs swig only when no wheel fits)"),
    ("MLflow store", _check_mlflow, "set MLFLOW_TRACKING_URI to a reachable server, or unset it for ./mlflow.db"),
    ("kfp", _check_kfp, "pip install 'frugalrl[pipelines]'"),
]


def run_checks(benchmark_mode: bool = False) -> list[CheckResult]:
    checks = list(CHECKS)
    if benchmark_mode:
        checks.append(("hardware probe", _probe_hardware, ""))
    results = []
    for name, fn, fix in checks:
        try:
            results.append(CheckResult(name, True, fn()))
        except Exception as exc:  # a check reports; it never crashes the report
            detail = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
            results.append(CheckResult(name, False, detail, fix))
    return results


def print_report(results: list[CheckResult]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="frugalrl check")
    table.add_column("check")
    table.add_column("status")
    table.add_column("detail")
    table.add_column("fix")
    for r in results:  # escaped: a detail or fix may hold brackets (frugalrl[pipelines]) that are not markup
        fix = escape(r.fix) if not r.ok else ""
        table.add_row(r.name, "[green]ok[/]" if r.ok else "[red]FAIL[/]", escape(r.detail), fix)
    Console(width=160).print(table)
