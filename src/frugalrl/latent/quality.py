"""How good is the virtual environment, measured against real play of the same run.

Figures on a real rollout (latents ``obs`` (T, N, D), ``actions``, clipped ``rewards``, ``dones``
with ``dones[t]`` = the episode ended at step t), all for the world model the run ends with:

- ``wm_latent_error_k`` / ``wm_latent_error_k_copy``: open-loop k-step latent prediction error
  with the recorded actions, beside predicting "no change" (the copy-last baseline): a model
  that does not beat copy-last imagines nothing the policy could not get from a still frame.
- ``wm_reward_accuracy`` / ``wm_done_accuracy``: one-step reward-class and termination accuracy
  (``wm_reward_accuracy_nonzero``: on the steps that had a reward, where a policy learns).
- ``wm_imagined_return`` / ``wm_real_return``: the summed reward over k steps from the same
  start latents, once in the world model with the policy acting, once as it really came. A gap
  means virtual rollouts teach the policy another game than the real one.
"""

from __future__ import annotations

import torch

from frugalrl.latent.world_model import REWARD_CLASSES, LatentWorldModel, reward_class


def _windows(dones: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(t, n) of every start whose next k steps stay in one episode (no end at t .. t+k-1)."""
    T = dones.shape[0]
    if k >= T:
        return torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.long)
    ended = dones.bool()
    ok = torch.stack([~ended[t : t + k].any(0) for t in range(T - k)])  # (T-k, N)
    return torch.nonzero(ok, as_tuple=True)


@torch.no_grad()
def world_model_quality(
    world_model: LatentWorldModel,
    policy: torch.nn.Module,
    obs: torch.Tensor,
    actions: torch.Tensor,
    rewards: torch.Tensor,
    dones: torch.Tensor,
    k: int,
    seed: int = 0,
) -> dict[str, float | None]:
    """The figures above on one real rollout; None where the rollout has no k-step window."""
    out: dict[str, float | None] = {}
    T, N = actions.shape[:2]
    z, a = obs[:-1].reshape(-1, obs.shape[-1]), actions[:-1].reshape(-1).long()
    pred = world_model(z, a)
    target = reward_class(rewards[:-1].reshape(-1))
    guessed = pred.reward_logits.argmax(-1)
    nonzero = target != 1
    out["wm_reward_accuracy"] = float((guessed == target).float().mean())
    hit = (guessed[nonzero] == target[nonzero]).float().mean()
    out["wm_reward_accuracy_nonzero"] = float(hit) if nonzero.any() else None
    out["wm_done_accuracy"] = float(((pred.done_logit > 0) == dones[:-1].reshape(-1).bool()).float().mean())

    t, n = _windows(dones, k)
    t, n = t[t + k < T], n[t + k < T]  # the latent k steps on must be in the rollout
    if len(t) == 0:
        return out | dict.fromkeys(
            ("wm_latent_error_k", "wm_latent_error_k_copy", "wm_imagined_return", "wm_real_return")
        )
    start = obs[t, n]
    latent = start
    for step in range(k):
        latent = world_model(latent, actions[t + step, n].long()).next_latent
    truth = obs[t + k, n]
    out["wm_latent_error_k"] = float(((latent - truth) ** 2).mean())
    out["wm_latent_error_k_copy"] = float(((start - truth) ** 2).mean())
    out["wm_real_return"] = float(sum(rewards[t + step, n] for step in range(k)).mean())

    with torch.random.fork_rng():  # the policy samples here without moving the run's random stream
        torch.manual_seed(seed)
        latent, total = start, torch.zeros(len(t))
        alive = torch.ones(len(t), dtype=torch.bool)
        for _ in range(k):
            action = policy.act(latent).action
            step_pred = world_model(latent, action)
            total += REWARD_CLASSES[step_pred.reward_logits.argmax(-1)] * alive
            alive &= ~(step_pred.done_logit > 0)
            latent = step_pred.next_latent
    out["wm_imagined_return"] = float(total.mean())
    out["wm_horizon_k"] = float(k)
    return out
