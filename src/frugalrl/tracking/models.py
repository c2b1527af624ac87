"""The policy as an MLflow model: one function, used by a live run and by a late upload alike.

The model is MLflow's models-from-code (``served_policy.py``, which imports no frugalrl) around a
``torch.export`` program of the policy, so a plain client loads it with torch, numpy and mlflow and
nothing is pickled. An Atari policy on grey frames is exported with its preprocessing
(``nets.screens.ScreenPolicy``): it takes the raw RGB screens ALE gives. The run's own ``policy.pt``
rides along as the artifact ``frugalrl_policy``, which ``frugalrl.load_policy`` rebuilds with frugalrl's
classes.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from frugalrl.envs.registry import is_atari
from frugalrl.nets.screens import ScreenPolicy

SERVED_CODE = Path(__file__).with_name("served_policy.py")
FRUGALRL_POLICY = "frugalrl_policy"  # the artifact name of the run's policy.pt inside the model
ALE_SCREEN = (210, 160, 3)  # every ALE game's RGB screen
EXAMPLE_BYTES = 64 * 1024  # an input example up to this size is stored with the model


def screen_input(env: dict[str, Any]) -> tuple[int, int, str] | None:
    """For an Atari policy on grey frames (``env``: its env config as a dict): the served model's stack size,
    its resize and a sentence on what a client sends; ``None`` for a model that takes observations as they are."""
    atari = env.get("atari") or {}
    if not (is_atari(env.get("id", "")) and atari.get("grayscale", True)):
        return None
    stack, size = int(atari.get("stack_num", 4)), int(atari.get("img_size", 84))
    return (
        stack,
        size,
        (
            f"(n, {stack}, {', '.join(map(str, ALE_SCREEN))}) uint8: the last {stack} RGB screens the policy acted on, "
            f"oldest first, as ALE returns them; each action is repeated {atari.get('frameskip', 4)} frames and the "
            f"screen sent is the max of the last two; the model makes them grey and {size}x{size} and stacks them"
        ),
    )


def served_module(policy: Any, input_example: np.ndarray) -> tuple[Any, np.ndarray, dict[str, Any]]:
    """What the served model runs, an example batch of its input, and its ``observation`` description."""
    screens = screen_input(policy.spec.get("env", {}))
    if screens is not None:
        stack, size, description = screens
        example = np.zeros((2, stack, *ALE_SCREEN), dtype=np.uint8)
        module = ScreenPolicy(policy, size)
    else:
        example = np.repeat(input_example[:1], 2, axis=0)  # a batch of 2: the export keeps the batch size free
        description = "observations as the env returns them, one per row"
        module = policy
    observation = {"shape": list(example.shape[1:]), "dtype": str(example.dtype), "description": description}
    return module.eval(), example, observation


def model_card(env: dict[str, Any], algo: str, run_id: str, eval_protocol: str) -> tuple[str, dict[str, str]]:
    """A registered policy version's description and its ``frugalrl.input`` / ``frugalrl.eval_protocol`` tags:
    what a plain client sends, gets and how the score was measured."""
    screens = screen_input(env)
    shown = screens[2] if screens else "(n, *observation shape) as the env returns them"
    description = (
        f"frugalrl {algo} policy for {env['id']} (MLflow run {run_id}). "
        f"Input: {shown}. Output: one action per row, deterministic (continuous actions clipped to the "
        f"action space). Score: {eval_protocol}. Load with mlflow.pyfunc.load_model(uri).predict(batch), "
        "serve with mlflow models serve; torch, numpy and mlflow are all it needs."
    )
    return description, {"frugalrl.input": shown, "frugalrl.eval_protocol": eval_protocol}


def log_policy_model(policy: Any, input_example: np.ndarray, policy_file: Path) -> str:
    """Log ``policy`` (its deterministic actions) as an MLflow model of the active run; its URI.

    ``input_example`` is one observation batch as the training env gives it; ``policy_file`` the
    ``policy.pt`` (or ``best_policy.pt``, or the run directory holding ``policy.pt``) the policy was loaded
    from or saved to.
    """
    import mlflow.pyfunc
    import torch
    from mlflow.models import ModelSignature
    from mlflow.types.schema import Schema, TensorSpec

    if getattr(policy, "observation_shape", None) is None:
        raise ValueError("log_policy_model needs a policy that knows its spaces: call policy.set_spaces(...) first")
    module, example, observation = served_module(policy.cpu(), input_example)
    batch = torch.export.Dim("batch", min=1, max=1 << 20)
    with torch.inference_mode():
        program = torch.export.export(module, (torch.as_tensor(example),), dynamic_shapes=({0: batch},))
        actions = module(torch.as_tensor(example)).numpy()
    action: dict[str, Any] = {"kind": "discrete"}
    if policy.action_bounds is not None:
        low, high = policy.action_bounds
        action = {"kind": "box", "low": np.asarray(low).tolist(), "high": np.asarray(high).tolist()}
    signature = ModelSignature(
        inputs=Schema([TensorSpec(np.dtype(observation["dtype"]), (-1, *observation["shape"]))]),
        outputs=Schema([TensorSpec(actions.dtype, (-1, *actions.shape[1:]))]),
    )
    requirements = [f"torch=={torch.__version__.split('+')[0]}", f"numpy=={np.__version__}"]
    with tempfile.TemporaryDirectory(prefix="frugalrl-model-") as tmp:
        folder = Path(tmp)
        torch.export.save(program, folder / "policy.pt2")
        (folder / "serving.json").write_text(json.dumps({"observation": observation, "action": action}, indent=2))
        source = Path(policy_file) / "policy.pt" if Path(policy_file).is_dir() else Path(policy_file)  # a run dir
        shutil.copyfile(source, folder / f"{FRUGALRL_POLICY}.pt")
        small = example[:1].nbytes <= EXAMPLE_BYTES
        with warnings.catch_warnings():  # raw screens: no example (MLflow would store 400 KB of JSON); it warns
            warnings.filterwarnings("ignore", message=".*input example was not provided.*")
            info = mlflow.pyfunc.log_model(
                name="policy",
                python_model=str(SERVED_CODE),
                artifacts={
                    "program": str(folder / "policy.pt2"),
                    "serving": str(folder / "serving.json"),
                    FRUGALRL_POLICY: str(folder / f"{FRUGALRL_POLICY}.pt"),
                },
                signature=signature,
                input_example=example[:1] if small else None,
                pip_requirements=requirements,
            )
    return info.model_uri
