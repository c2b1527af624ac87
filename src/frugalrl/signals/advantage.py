"""|advantage| as the importance signal: free, the rollout already holds it.

The policy-gradient term of a sample is proportional to its advantage as the loss sees it (centred and
scaled when ``ppo.norm_adv``), so a sample with a small |advantage| moves the policy little. Two rules:

- ``advantage_top``: keep the ``kept_count`` samples of largest |advantage| (deterministic top-k; the
  docs' example selector, with ``norm_adv``'s centring). The mean over them is biased towards large
  |advantage| states: the value loss and entropy of the others are dropped too.
- ``advantage_proportional``: draw ``kept_count`` samples with replacement, sample i with probability
  ``p_i = (1 - uniform_mix) * |A_i| / sum|A| + uniform_mix / n``, afresh every epoch, so no state is
  always skipped. ``unbiased``: weight each draw ``1 / (n * p_i)`` (importance sampling), so the expected
  loss is plain PPO's full-batch loss and only its variance changes; ``uniform_mix`` bounds the weights
  at ``1 / uniform_mix``. Without it, a plain mean over the draws (biased like top-k, less sharply).

Cost: none beyond a sort or a draw over the rollout; no network pass.
"""

from __future__ import annotations

import torch

from frugalrl.selection import Selection
from frugalrl.signals.base import SignalSkip, kept_count, top_k


class AdvantageTop(SignalSkip):
    technique = "advantage_top"

    def epoch_scores(self, epoch: int) -> torch.Tensor:
        return self.loss_advantages().abs()

    def keep(self, indices: torch.Tensor, scores: torch.Tensor) -> Selection:
        return top_k(indices, scores, kept_count(self.keep_fraction, len(indices)))


class AdvantageProportional(SignalSkip):
    technique = "advantage_proportional"

    def __init__(self, *args, uniform_mix: float = 0.1, unbiased: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        self.uniform_mix = uniform_mix
        self.unbiased = unbiased

    def epoch_scores(self, epoch: int) -> torch.Tensor:
        return self.loss_advantages().abs()

    def probabilities(self, scores: torch.Tensor) -> torch.Tensor:
        """The draw's probabilities over a set of samples: |A|-proportional, mixed with uniform."""
        n = len(scores)
        total = scores.sum()
        share = scores / total if total > 0 else torch.full_like(scores, 1.0 / n)
        return (1.0 - self.uniform_mix) * share + self.uniform_mix / n

    def keep(self, indices: torch.Tensor, scores: torch.Tensor) -> Selection:
        k = kept_count(self.keep_fraction, len(indices))
        p = self.probabilities(scores)
        drawn = torch.multinomial(p, k, replacement=True)
        # sum(w * loss) / k with w = 1 / (n p) has the full mean loss as its expectation
        weights = 1.0 / (len(indices) * p[drawn]) if self.unbiased else None
        return Selection(indices[drawn], weights, float(k))
