"""Curriculum by score (the RMT seed's ``difficulty_metric: episode_return`` / ``stages``).

Stages are thresholds on the mean recent episode return; the first time the return reaches a
stage's threshold, its learning rate and gamma take effect (stages are passed in order, once).
"""

from __future__ import annotations

import math

from frugalrl.config import ScoreStagesConfig
from frugalrl.meta.controller import Adjustment


class ScoreStages:
    def __init__(self, config: ScoreStagesConfig):
        self.stages = list(config.stages)
        self.passed = 0  # stages reached so far

    def observe(self, episode_return: float | None, learning_rate: float, gamma: float) -> list[Adjustment]:
        """Adjustments for every stage whose threshold the return has now reached."""
        changes: list[Adjustment] = []
        if episode_return is None or not math.isfinite(episode_return):
            return changes
        while self.passed < len(self.stages) and episode_return >= self.stages[self.passed].threshold:
            stage = self.stages[self.passed]
            reason = f"mean return {episode_return:.1f} reached stage {self.passed + 1} threshold {stage.threshold:g}"
            if stage.learning_rate is not None and stage.learning_rate != learning_rate:
                changes.append(Adjustment("learning_rate", learning_rate, stage.learning_rate, reason))
                learning_rate = stage.learning_rate
            if stage.gamma is not None and stage.gamma != gamma:
                changes.append(Adjustment("gamma", gamma, stage.gamma, reason))
                gamma = stage.gamma
            self.passed += 1
        return changes
