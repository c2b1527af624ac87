"""The value error ``|return - V(s)|`` as the importance signal (``value_error``): top-k by it.

Before the update's first step the critic is the one that made the rollout's values, and GAE's return
is ``advantage + value``: the error is then exactly |advantage| (uncentred), known for free. From the
second epoch on the critic has moved, and the error under the *current* critic is what tells which
states it still gets wrong; that takes one forward pass of the policy over the rollout per epoch
(``signal_forward`` in the cost meter: (epochs - 1) * rollout samples per update, scoring work).
The mean over the kept samples is biased towards the states the critic gets wrong; the policy term of
the others is dropped with them.
"""

from __future__ import annotations

import torch

from frugalrl.selection import Selection
from frugalrl.signals.base import SignalSkip, kept_count, top_k


class ValueErrorTop(SignalSkip):
    technique = "value_error"

    def epoch_scores(self, epoch: int) -> torch.Tensor:
        if epoch == 0:  # the rollout's critic: return - value is the advantage itself
            return self.batch.advantages.abs()
        _, value = self.current_policy()
        return (self.batch.returns - value).abs()

    def keep(self, indices: torch.Tensor, scores: torch.Tensor) -> Selection:
        return top_k(indices, scores, kept_count(self.keep_fraction, len(indices)))
