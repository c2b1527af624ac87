"""The gradient step's synchronisation, handed to every learner at construction.

A learner calls its ``GradientSync`` after every ``backward()`` and before clipping and the
optimizer step, once per parameter group it steps (``"policy"``; SAC: ``"critic"``, ``"actor"``,
``"temperature"``). The sync may rewrite every ``p.grad`` in place. A single process trains
with ``LocalSync`` (nothing to do); torchrun workers get ``frugalrl.fusion.launch.Synchronizer``
(the gradient reducer ``distributed.kind`` names: top-k fusion or a dense all-reduce). A new scheme
implements ``__call__`` and is passed in; the learners do not change.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import torch


class GradientSync(Protocol):
    def __call__(self, params: Iterable[torch.Tensor], group: str = "policy") -> None:
        """Make the ``.grad`` of ``params`` the gradient every worker steps with."""


class LocalSync:
    """One process: the local gradient is the gradient (the learners' default)."""

    def __call__(self, params: Iterable[torch.Tensor], group: str = "policy") -> None:
        return None


LOCAL_SYNC = LocalSync()  # stateless, so one instance serves every learner
