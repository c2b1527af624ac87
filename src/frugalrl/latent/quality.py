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
  start latents (every step of the rollout with k recorded steps after it), once in the world
  model with the policy acting (expected rewards, each step weighted by the probability that the
  episode is still going), once as it really came (up to and including the step that ended the
  episode, if one did: what followed belongs to the next one); and ``wm_imagined_events`` /
  ``wm_real_events``, the same for the number of nonzero rewards (for a game like Boxing, whose
  signed return is near zero). A gap means virtual rollouts teach the policy another game than the
  real one. ``wm_imagined_survival`` / ``wm_real_survival``: the share of those starts still in
  their episode after k steps (imagined: the mean probability), so a gap in events can be told
  apart from a gap in how often imagined episodes end.

Until 2026-12-05 the real side counted only the starts whose k steps stayed in one episode (the
windows the latent error needs) while the imagined side was weighted by survival: the two halves
measured different things (the real one conditioned on no end). Both now count from every start.
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

    out |= _latent_error(world_model, obs, actions, dones, k)
    out["wm_horizon_k"], out["wm_rollout_steps"] = float(k), float(T)
    if k >= T:
        return out | dict.fromkeys(RETURN_KEYS)
    # every start with k recorded steps after it (T - k of them per env), the same on both sides
    t = torch.arange(T - k).repeat_interleave(N)
    n = torch.arange(N).repeat(T - k)
    ended = dones.bool()
    real_return, real_events = torch.zeros(len(t)), torch.zeros(len(t))
    real_alive = torch.ones(len(t))  # 1 while the real episode is still going
    for step in range(k):
        reward = rewards[t + step, n].float()
        real_return += reward * real_alive
        real_events += (reward != 0).float() * real_alive
        real_alive = real_alive * (~ended[t + step, n]).float()
    out["wm_real_return"] = float(real_return.mean())
    out["wm_real_events"] = float(real_events.mean())
    out["wm_real_survival"] = float(real_alive.mean())

    with torch.random.fork_rng():  # the policy samples here without moving the run's random stream
        torch.manual_seed(seed)
        latent, total, events = obs[t, n], torch.zeros(len(t)), torch.zeros(len(t))
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
    out["wm_imagined_survival"] = float(alive.mean())
    return out


RETURN_KEYS = ("wm_imagined_return", "wm_real_return", "wm_imagined_events", "wm_real_events",
               "wm_imagined_survival", "wm_real_survival")  # fmt: skip


def _latent_error(
    world_model: LatentWorldModel, obs: torch.Tensor, actions: torch.Tensor, dones: torch.Tensor, k: int
) -> dict[str, float | None]:
    """Open-loop k-step latent error with the recorded actions, beside copy-last, on the starts whose k
    steps stay in one episode (the latent k steps on must be the same game's); None without one."""
    T = actions.shape[0]
    t, n = _windows(dones, k)
    t, n = t[t + k < T], n[t + k < T]  # the latent k steps on must be in the rollout
    if len(t) == 0:
        return dict.fromkeys(("wm_latent_error_k", "wm_latent_error_k_copy"))
    start = latent = obs[t, n]
    for step in range(k):
        latent = world_model(latent, actions[t + step, n].long()).next_latent
    truth = obs[t + k, n]
    return {"wm_latent_error_k": float(((latent - truth) ** 2).mean()),
            "wm_latent_error_k_copy": float(((start - truth) ** 2).mean())}  # fmt: skip


def diagnostic_gate(figures: dict[str, float | None], min_auc: float, events_tolerance: float) -> tuple[str, str]:
    """Does the world model imagine the real game well enough for virtual steps to teach it?

    Two tests on the run's last real rollout (``world_model_quality``'s figures): the reward head
    ranks rewarded steps first (AUC at least ``min_auc``), and the expected number of reward events
    over k imagined steps is within ``events_tolerance`` of the real number from the same starts.
    Returns ``(status, reason)``: ``passed``, ``failed`` or ``not measurable`` (a rollout without
    a reward, or without an unrewarded step, gives neither an AUC nor an event ratio).
    """
    auc, imagined, real = (figures.get(k) for k in ("wm_reward_auc", "wm_imagined_events", "wm_real_events"))
    horizon, steps = figures.get("wm_horizon_k"), figures.get("wm_rollout_steps")
    if imagined is None and horizon and steps and horizon >= steps:
        return "not measurable", (
            f"the world model's horizon ({horizon:.0f} steps, latent.world_model.horizon) is not shorter than the "
            f"last real rollout ({steps:.0f} steps, ppo.num_steps): no window to compare; lower one or raise the other"
        )
    if auc is None:
        return "not measurable", "the last real rollout had no reward event (or no step without one) to rank"
    if imagined is None or not real:
        return "not measurable", "the last real rollout had no reward event within the horizon of any start"
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
