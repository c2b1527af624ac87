"""The Python API (docs/python-api.md): the page's quick start as written, predict's shapes, one-line errors,
and an ``import frugalrl`` that loads no torch."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

import frugalrl
from frugalrl.errors import CheckpointError, ConfigError

from .conftest import REPO, tiny_config

DOC = REPO / "docs" / "python-api.md"
API = ["Callback", "EvalResult", "FrugalError", "Run", "evaluate", "load_config", "load_policy", "train"]


def _block(heading: str, number: int = 0) -> str:
    """The ``number``-th ``python`` block under ``## heading`` in docs/python-api.md."""
    section = DOC.read_text().split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)[number]


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory):
    return frugalrl.train(tiny_config(), tmp_path_factory.mktemp("api") / "run", progress=False)


@pytest.mark.slow
def test_the_quick_start_runs_as_written(tmp_path, capsys):
    """The page's block, executed in a fresh working directory holding the repository's configs/ (tracking on,
    to the test's own sqlite store); its MLflow model loads and predicts too."""
    shutil.copytree(REPO / "configs", tmp_path / "configs")
    namespace: dict = {}
    exec(compile(_block("Quick start"), str(DOC), "exec"), namespace)
    run = namespace["run"]
    assert run.run_dir.resolve() == (tmp_path / "runs" / "cartpole-api").resolve()
    assert run.summary["eval_episodes"] == 20 and run.mlflow_run_id == run.summary["mlflow_run_id"] is not None
    assert isinstance(namespace["result"], frugalrl.EvalResult) and len(namespace["result"].returns) == 10
    assert capsys.readouterr().out.splitlines()[-1].startswith("mean ")
    logged = frugalrl.load_policy(run.summary["model_uri"])
    obs = np.zeros((3, 4), np.float32)
    np.testing.assert_array_equal(logged.predict(obs), run.policy.predict(obs))


def test_predict_takes_one_observation_or_a_batch(cartpole_run):
    policy = cartpole_run.policy
    obs = np.random.default_rng(0).normal(size=(5, 4))  # float64, as a user's arrays often are
    batch = policy.predict(obs)
    assert batch.shape == (5,) and batch.dtype == np.int64
    one = policy.predict(obs[0])
    assert isinstance(one, np.ndarray) and one.shape == () and one == batch[0]
    assert policy.predict(torch.as_tensor(obs, dtype=torch.float32)).tolist() == batch.tolist()
    assert policy.predict(obs[0].tolist()) == batch[0]
    expected = policy(torch.as_tensor(obs, dtype=torch.float32))  # calling the module works as before
    assert isinstance(expected, torch.Tensor) and expected.tolist() == batch.tolist()
    with pytest.raises(frugalrl.FrugalError, match=r"fits neither one observation \(4,\) nor a batch"):
        policy.predict(np.zeros(3))


def test_predict_clips_continuous_actions_to_their_space(tmp_path):
    config = tiny_config(env={"id": "Pendulum-v1", "num_envs": 2}, ppo={"total_timesteps": 128, "num_steps": 32})
    run = frugalrl.train(config, tmp_path / "pendulum", progress=False)
    obs = np.zeros((6, 3), np.float32)
    actions = run.policy.predict(obs, deterministic=False)
    assert actions.shape == (6, 1) and np.all(np.abs(actions) <= 2.0)
    assert run.policy.predict(obs[0]).shape == (1,)


def test_evaluate_takes_a_run_a_policy_or_a_directory(cartpole_run):
    by_run = frugalrl.evaluate(cartpole_run, episodes=3, seed=5)
    by_dir = frugalrl.evaluate(cartpole_run.run_dir, episodes=3, seed=5)
    assert by_run.returns == by_dir.returns and len(by_run.returns) == 3
    with pytest.raises(frugalrl.FrugalError, match="episodes 0 must be"):
        frugalrl.evaluate(cartpole_run.policy, episodes=0)


def test_a_bad_config_dict_is_one_line_and_the_dict_is_kept():
    data = {"env": {"id": "CartPole-v1"}, "ppo": {"total_timesteps": -1}}
    with pytest.raises(frugalrl.FrugalError) as info:
        frugalrl.load_config(data)
    assert isinstance(info.value, ConfigError)
    assert str(info.value) == "config dict: ppo.total_timesteps = -1: Input should be greater than or equal to 1"
    assert frugalrl.load_config(data, ["ppo.total_timesteps=64"]).ppo.total_timesteps == 64
    assert data["ppo"] == {"total_timesteps": -1}  # overrides apply to a copy
    with pytest.raises(ConfigError, match="^config dict: ppo.lr: unknown key"):
        frugalrl.train({"env": {"id": "CartPole-v1"}, "ppo": {"lr": 1}})


def test_a_missing_policy_is_one_line(tmp_path):
    with pytest.raises(frugalrl.FrugalError) as info:
        frugalrl.load_policy(tmp_path / "nowhere")
    assert isinstance(info.value, CheckpointError)
    assert "\n" not in str(info.value) and "not found" in str(info.value)


def test_train_refuses_several_workers_and_names_its_own_directory(tmp_path, monkeypatch):
    with pytest.raises(frugalrl.FrugalError, match="^distributed.workers 2: .* --workers N$"):
        frugalrl.train(tiny_config(distributed={"workers": 2}))
    from frugalrl import api

    (tmp_path / "runs" / "tiny").mkdir(parents=True)
    assert api._new_run_dir("tiny") == api.RUNS_DIR / "tiny-2"


def test_all_is_exactly_the_api_and_train_is_the_function():
    assert sorted(frugalrl.__all__) == API
    code = "import frugalrl.training, frugalrl; print(callable(frugalrl.train), frugalrl.train.__module__)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.split() == ["True", "frugalrl.api"]


def test_import_frugalrl_loads_no_torch():
    """The API's names load on first use: ``import frugalrl`` stays as light as ``frugalrl --help``."""
    shown = "m in ('torch', 'pydantic', 'mlflow', 'gymnasium') or m == 'frugalrl.api'"
    code = f"import sys, frugalrl\nprint(sorted(m for m in sys.modules if {shown}))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"


def test_a_policy_whose_env_no_longer_validates_is_one_line(cartpole_run):
    policy = copy.deepcopy(cartpole_run.policy)
    policy.spec = {**policy.spec, "env": {**policy.spec["env"], "id": "Nowhere-v0"}}
    with pytest.raises(ConfigError, match="^the policy: env: id = 'Nowhere-v0': ") as info:
        frugalrl.evaluate(policy, episodes=1)
    assert "\n" not in str(info.value)


def test_your_own_technique_registers_from_your_module_and_trains_as_written(tmp_path, monkeypatch, capsys):
    """ "Your own technique": its module written to a folder on sys.path (not the working directory), the
    page's training block run as written; a typo in the kind is the one-line config error of a built-in."""
    from frugalrl.selectors import SELECTORS

    folder = tmp_path / "userpkgs"
    folder.mkdir()
    (folder / "mytech.py").write_text(_block("Your own technique", 0))
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.chdir(tmp_path)
    shutil.copytree(REPO / "configs", tmp_path / "configs")
    try:
        namespace: dict = {}
        exec(compile(_block("Your own technique", 1), str(DOC), "exec"), namespace)
        run = namespace["run"]
        assert run.summary["techniques"] == ["in_order"] and capsys.readouterr().out.strip().endswith("['in_order']")
        assert run.policy.predict(np.zeros(4, np.float32)).shape == ()
        with pytest.raises(ConfigError, match=r"selection.kind = 'in_ordr'.*in_order"):
            frugalrl.load_config({"plugins": ["mytech"], "selection": {"kind": "in_ordr"}})
    finally:
        SELECTORS.unregister("in_order")
        sys.modules.pop("mytech", None)


def test_evaluate_on_another_env_needs_spaces_the_policy_takes(cartpole_run, capsys):
    from frugalrl.cli import main

    result = frugalrl.evaluate(cartpole_run, episodes=2, env="CartPole-v0")  # the same spaces, another time limit
    assert len(result.returns) == 2
    with pytest.raises(frugalrl.FrugalError, match=r"env Acrobot-v1: observations \(6,\) .* do not fit a policy"):
        frugalrl.evaluate(cartpole_run, episodes=2, env="Acrobot-v1")
    with pytest.raises(SystemExit) as exited:  # the CLI says the same in one line
        main(["evaluate", str(cartpole_run.run_dir), "--env", "Acrobot-v1"])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1 and "do not fit a policy trained on CartPole-v1" in err


def test_a_race_from_python_runs_as_written(tmp_path, monkeypatch, capsys):
    """The page's race block, at one seed of one CPU-second (the page's 5 seeds of 15 are the docs' race)."""
    shutil.copytree(REPO / "configs", tmp_path / "configs")
    monkeypatch.chdir(tmp_path)
    code = _block("A race from Python").replace(
        "seeds=(1, 2, 3, 4, 5), cpu_budget_s=15.0", "seeds=(1,), cpu_budget_s=1.0"
    )
    assert "seeds=(1,)" in code
    namespace: dict = {}
    exec(compile(code, str(DOC), "exec"), namespace)
    assert namespace["winner"] == "plain" and [v.verdict for v in namespace["verdicts"]] == [
        "control", "too few seeds to decide"]  # fmt: skip
    assert len((tmp_path / "runs" / "race" / "rows.jsonl").read_text().splitlines()) == 2
    assert capsys.readouterr().out.splitlines()[-1].startswith("plain [('plain'")
