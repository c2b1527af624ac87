"""The code of every policy frugalrl logs to MLflow (MLflow's models-from-code): it imports no frugalrl.

MLflow copies this file into the model and runs it when the model loads, in a Python that has torch,
numpy and mlflow and nothing of frugalrl. It reads two artifacts the model carries:

- ``program``: the policy as a ``torch.export`` program (weights and graph; no Python classes to
  unpickle), taking a batch of observations and giving the deterministic actions;
- ``serving``: JSON saying what the input is (``observation``: shape, dtype and a sentence) and the
  action space (``discrete``, or ``box`` with its bounds, to which actions are clipped as frugalrl's
  evaluation clips them).

``predict`` takes a batch shaped as the signature says and returns one action per row. Keep this
file free of frugalrl imports: tests/test_served_models.py loads it where importing frugalrl fails.
"""

import json

import mlflow.models
import mlflow.pyfunc
import numpy as np
import torch


class ServedPolicy(mlflow.pyfunc.PythonModel):
    """A frugalrl policy as a plain MLflow pyfunc."""

    def load_context(self, context) -> None:
        self.program = torch.export.load(context.artifacts["program"]).module()
        with open(context.artifacts["serving"]) as handle:
            self.serving = json.load(handle)
        action = self.serving["action"]
        self.bounds = (np.asarray(action["low"]), np.asarray(action["high"])) if action["kind"] == "box" else None

    # np.ndarray: the one hint MLflow neither warns about nor turns into a schema (the signature is the schema)
    def predict(self, context, model_input: np.ndarray, params=None) -> np.ndarray:
        observation = self.serving["observation"]
        batch = np.asarray(model_input, dtype=observation["dtype"])
        if batch.shape[1:] != tuple(observation["shape"]):
            raise ValueError(
                f"input shape {batch.shape}: this policy takes (n, {', '.join(map(str, observation['shape']))}) "
                f"{observation['dtype']}: {observation['description']}"
            )
        with torch.inference_mode():
            actions = self.program(torch.as_tensor(batch)).numpy()
        return np.clip(actions, *self.bounds) if self.bounds is not None else actions


mlflow.models.set_model(ServedPolicy())
