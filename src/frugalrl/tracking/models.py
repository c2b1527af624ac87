"""The policy as an MLflow model: one function, used by a live run and by a late upload alike."""

from __future__ import annotations

from typing import Any

import numpy as np

import frugalrl


def log_policy_model(policy: Any, input_example: np.ndarray) -> str:
    """The policy as an MLflow PyTorch model of the active run; its URI.

    frugalrl's classes are pickled by value, so ``mlflow.pyfunc.load_model`` works in a
    Python that has torch, numpy and mlflow but not frugalrl.
    """
    import cloudpickle
    import mlflow.pytorch
    import torch

    # Pickle format and explicit requirements: skips torch.export and a slow
    # requirements-inference subprocess (together ~10 s per run on a small CPU).
    requirements = [f"torch=={torch.__version__.split('+')[0]}", f"numpy=={np.__version__}"]
    cloudpickle.register_pickle_by_value(frugalrl)
    try:
        info = mlflow.pytorch.log_model(
            policy,
            name="policy",
            input_example=input_example,
            serialization_format="pickle",
            pip_requirements=requirements,
        )
    finally:
        cloudpickle.unregister_pickle_by_value(frugalrl)
    return info.model_uri
