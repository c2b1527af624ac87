"""Networks: torsos, action heads and the actor-critic policy."""

from frugalrl.nets.heads import CategoricalHead, GaussianHead
from frugalrl.nets.policy import ActorCritic, ExportedPolicy, build_actor_critic
from frugalrl.nets.torsos import MLP, NatureCNN

__all__ = ["MLP", "ActorCritic", "CategoricalHead", "ExportedPolicy", "GaussianHead", "NatureCNN", "build_actor_critic"]
