"""How good is the virtual environment, measured against real play of the same run.

Figures on a real rollout (latents ``obs`` (T, N, D), ``actions``, clipped ``rewards``, ``dones``
with ``dones[t]`` = the episode ended at step t), all for the world model the run ends with:

- ``wm_latent_error_k`` / ``wm_latent_error_k_copy``: open-loop k-step latent prediction error
  with the recorded actions, beside predicting "no change" (the copy-last baseline): a model
  that does not beat copy-last imagines nothing the policy could not get from a still frame.
- ``wm_reward_accuracy`` / ``wm_done_accuracy``: one-step reward-class and termination accuracy
  of the most probable class (``wm_reward_accuracy_nonzero``: on the steps that had a reward).
- ``wm_reward_auc``: how well the calibrated probability of a nonzero reward ranks the steps that
  had one above those that had none (ROC AUC; 0.5 is chance, None without both kinds of step).
- ``wm_imagined_return`` / ``wm_real_return``: the summed reward over k steps from the same
  start latents, once in the world model with the policy acting (expected rewards, each step
  weighted by the probability that the episode is still going), once as it really came; and
  ``wm_imagined_events`` / ``wm_real_events``, the same for the number of nonzero rewards (for a
  game like Boxing, whose signed return is near zero). A gap means virtual rollouts teach the
  policy another game than the real one.
"""

from __future__ import annotations

import torch

from frugalrl.latent.world_model import LatentWorldModel, reward_class


def roc_auc(scores: torch.Tensor, positive: torch.Tensor) -> float | None:
    """Probability that a random positive scores above a random negative (ties count half): the
    Mann-Whitney U of the positives over the number of pairs."""
    from scipy.stats import mannwhitneyu

    pos, neg = scores[positive.bool()], scores[~positive.bool()]
    if len(pos) == 0 or len(neg) == 0:
        return None
    return float(mannwhitneyu(pos.double().numpy(), neg.double().numpy()).statistic / (len(pos) * len(neg)))


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
    p_event = 1.0 - world_model.reward_probs(pred)[:, 1]  # a nonzero reward, calibrated
    out["wm_reward_auc"] = roc_auc(p_event, nonzero)

    t, n = _windows(dones, k)
    t, n = t[t + k < T], n[t + k < T]  # the latent k steps on must be in the rollout
    if len(t) == 0:
        return out | dict.fromkeys(
            (
                "wm_latent_error_k",
                "wm_latent_error_k_copy",
                "wm_imagined_return",
                "wm_real_return",
                "wm_imagined_events",
                "wm_real_events",
            )
        )
    start = obs[t, n]
    latent = start
    for step in range(k):
        latent = world_model(latent, actions[t + step, n].long()).next_latent
    truth = obs[t + k, n]
    out["wm_latent_error_k"] = float(((latent - truth) ** 2).mean())
    out["wm_latent_error_k_copy"] = float(((start - truth) ** 2).mean())
    out["wm_real_return"] = float(sum(rewards[t + step, n] for step in range(k)).mean())
    out["wm_real_events"] = float(sum((rewards[t + step, n] != 0).float() for step in range(k)).mean())

    with torch.random.fork_rng():  # the policy samples here without moving the run's random stream
        torch.manual_seed(seed)
        latent, total, events = start, torch.zeros(len(t)), torch.zeros(len(t))
        alive = torch.ones(len(t))  # the probability that the imagined episode is still going
        for _ in range(k):
            action = policy.act(latent).action
            step_pred = world_model(latent, action)
            total += world_model.expected_reward(step_pred) * alive
            events += (1.0 - world_model.reward_probs(step_pred)[:, 1]) * alive
            alive = alive * (1.0 - world_model.done_prob(step_pred))
            latent = step_pred.next_latent
    out["wm_imagined_return"] = float(total.mean())
    out["wm_imagined_events"] = float(events.mean())
    out["wm_horizon_k"] = float(k)
    return out


def diagnostic_gate(figures: dict[str, float | None], min_auc: float, events_tolerance: float) -> tuple[str, str]:
    """Does the world model imagine the real game well enough for virtual steps to teach it?

    Two tests on the run's last real rollout (``world_model_quality``'s figures): the reward head
    ranks rewarded steps first (AUC at least ``min_auc``), and the expected number of reward events
    over k imagined steps is within ``events_tolerance`` of the real number from the same starts.
    Returns ``(status, reason)``: ``passed``, ``failed`` or ``not measurable`` (a rollout without
    a reward, or without an unrewarded step, gives neither an AUC nor an event ratio).
    """
    auc, imagined, real = (figures.get(k) for k in ("wm_reward_auc", "wm_imagined_events", "wm_real_events"))
    if auc is None or imagined is None or not real:
        return "not measurable", "the last real rollout had no reward event to compare against"
    ratio = imagined / real
    misses = []
    if auc < min_auc:
        misses.append(f"reward AUC {auc:.2f} < {min_auc:.2f}")
    if abs(ratio - 1.0) > events_tolerance:
        misses.append(
            f"{imagined:.3f} imagined reward events per {figures.get('wm_horizon_k', 0):.0f} steps against "
            f"{real:.3f} real ({ratio:.2f}x, outside {events_tolerance:.0%})"
        )
    reason = "; ".join(misses) or f"reward AUC {auc:.2f}, imagined / real reward events {ratio:.2f}x"
    return ("failed" if misses else "passed"), reason
