"""The clipped-ratio mask as the importance signal (``clipped_ratio``): skip what the clip already ignores.

PPO's policy term is ``max(-A r, -A clip(r, 1 - c, 1 + c))``. Where the clipped branch is the larger one
(``A > 0`` and ``r > 1 + c``, or ``A < 0`` and ``r < 1 - c``) it is constant in the parameters: that
sample's policy gradient is zero. Skipping it first loses no policy gradient at all; it does lose the
sample's value-loss and entropy gradient, which the clip does not touch.

The plan, of ``kept_count`` samples like random skipping's, for s = n - kept samples to skip and m of the
n samples clipped that way:

- m >= s: the s clipped samples furthest outside the clip range are skipped (the most off-policy ones;
  the other m - s clipped samples are kept and, again, give no policy gradient);
- m < s: all m are skipped, and s - m more drawn uniformly from the rest: random skipping of the
  remainder. In the update's first epoch the policy is the rollout's, r = 1 everywhere, m = 0: the plan
  is exactly random skipping, and needs no forward pass.

The ratio needs the current policy's log-probabilities: one forward pass over the rollout per epoch
after the first (``signal_forward`` in the cost meter). The clip range ``c`` is ``ppo.clip_coef``, annealed
as PPO anneals it (``ppo.anneal_clip``) by the update count the env step gives (``step / rollout - 1``),
which is PPO's own count for a run of real env steps. ``metrics`` reports the clipped share and how
often fewer than the skip count were clipped (the m < s case).
"""

from __future__ import annotations

import math

import torch

from frugalrl.selection import Selection
from frugalrl.signals.base import SignalSkip, kept_count, top_k


def inactive_distance(ratio: torch.Tensor, advantages: torch.Tensor, clip: float) -> torch.Tensor:
    """How far outside the clip range each sample's ratio is on the side where the clip zeroes its policy
    gradient; 0 where the gradient flows (inside the range, or outside it on the other side)."""
    above = (advantages > 0) & (ratio > 1 + clip)
    below = (advantages < 0) & (ratio < 1 - clip)
    return torch.where(above, ratio - (1 + clip), torch.where(below, (1 - clip) - ratio, torch.zeros_like(ratio)))


class ClippedRatioSkip(SignalSkip):
    technique = "clipped_ratio"

    def __init__(self, *args, clip_coef: float = 0.2, anneal_clip: bool = False, total_timesteps: int = 1, **kwargs):
        super().__init__(*args, **kwargs)
        self.clip_coef = clip_coef
        self.anneal_clip = anneal_clip
        self.total_timesteps = total_timesteps
        self._clipped = 0.0  # clipped share summed over the rescored epochs since the last ``metrics``
        self._short = 0  # rescored epochs with fewer clipped samples than the skip count
        self._epochs = 0

    def clip(self) -> float:
        """The clip range PPO uses in this update."""
        if not self.anneal_clip:
            return self.clip_coef
        rollout = len(self.batch.obs)
        update = max(0, self.step // rollout - 1)  # updates completed before this one
        return self.clip_coef * (1.0 - update / math.ceil(self.total_timesteps / rollout))

    def epoch_scores(self, epoch: int) -> torch.Tensor:
        n = len(self.batch.obs)
        # Unclipped samples rank by a uniform draw in [0, 1), clipped ones below every unclipped one by
        # minus their distance: top-k keeps a random subset of the unclipped first, then the least clipped.
        draw = torch.rand(n, device=self.batch.obs.device)
        if epoch == 0:  # r = 1 for every sample: nothing is clipped yet
            return draw
        logprob, _ = self.current_policy()
        distance = inactive_distance((logprob - self.batch.logprobs).exp(), self.loss_advantages(), self.clip())
        clipped = distance > 0
        m = int(clipped.sum())
        self._clipped += m / n
        self._short += m < n - kept_count(self.keep_fraction, n)
        self._epochs += 1
        return torch.where(clipped, -distance, draw)

    def keep(self, indices: torch.Tensor, scores: torch.Tensor) -> Selection:
        return top_k(indices, scores, kept_count(self.keep_fraction, len(indices)))

    def metrics(self) -> dict[str, float]:
        """Clipped share of the rollout at each rescoring, and the share of rescorings with fewer clipped
        samples than the skip count, since the last call (nan: no epoch rescored)."""
        epochs = self._epochs
        out = {
            "clipped_ratio_share": self._clipped / epochs if epochs else math.nan,
            "clipped_ratio_short": self._short / epochs if epochs else math.nan,
        }
        self._clipped, self._short, self._epochs = 0.0, 0, 0
        return out
