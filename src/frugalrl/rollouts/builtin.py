"""The built-in rollout sources: ``real`` (the config's vector env) and ``latent`` (the latent curriculum)."""

from __future__ import annotations

from frugalrl.algos.base import Learner
from frugalrl.envs.factory import make_vec_env
from frugalrl.latent.train import latent_learner
from frugalrl.learners import build_learner
from frugalrl.rollouts import ROLLOUT_SOURCES, RolloutContext


@ROLLOUT_SOURCES.register("real")
def real(context: RolloutContext) -> Learner:
    config = context.config
    env = make_vec_env(config.env, gamma=config.algo_config.gamma)
    return build_learner(config, env, context.meter, context.device, context.gradient_sync)


@ROLLOUT_SOURCES.register("latent")
def latent(context: RolloutContext) -> Learner:
    # one process only (config validation refuses distributed.workers > 1), so no gradient sync to pass
    return latent_learner(context.config, context.out, context.meter, context.device)
