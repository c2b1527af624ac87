"""Changed physics for MuJoCo tasks: the "same robot, different world" targets of transfer.

Scales act on the compiled ``MjModel`` right after ``gym.make``, so every reset keeps them
(gymnasium's MuJoCo envs never recompile the model).
"""

from __future__ import annotations

import gymnasium as gym

from frugalrl.config import DynamicsConfig
from frugalrl.errors import EnvError


def apply_dynamics(env: gym.Env, dynamics: DynamicsConfig, env_id: str) -> gym.Env:
    """``env`` with its MuJoCo model's masses, friction and gravity changed as configured."""
    if not dynamics.changed:
        return env
    model = getattr(env.unwrapped, "model", None)
    if model is None or not hasattr(model, "body_mass"):
        raise EnvError(f"env {env_id}: env.dynamics changes MuJoCo physics, and this is not a MuJoCo env; remove it")
    model.body_mass[:] *= dynamics.mass_scale
    model.body_inertia[:] *= dynamics.mass_scale  # the same bodies, denser: inertia scales with mass
    model.geom_friction[:, 0] *= dynamics.friction_scale
    if dynamics.gravity is not None:
        model.opt.gravity[:] = dynamics.gravity
    return env
