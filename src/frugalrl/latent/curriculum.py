"""Which source the next rollout comes from: the virtual env or the real one.

``stages`` mode (the seed's default 70/30 -> 30/70 -> 100% real): stage i lasts
``real_share_i * total_real_steps`` real env steps, and within it virtual rollouts are
interleaved so that virtual steps make up ``virtual_fraction_i`` of the stage's steps.

``adaptive`` mode (the seed's ``auto_schedule``): the virtual fraction is the first of
``adaptive_virtual_fractions`` while the recent real return is below ``adaptive_high *
target_score`` and the second once it is above: more real data once the agent plays well,
back to the world model when the score drops.
"""

from __future__ import annotations

from typing import Any

from frugalrl.config import CurriculumConfig


class CurriculumScheduler:
    def __init__(self, config: CurriculumConfig, total_real_steps: int):
        self.config = config
        self.total_real_steps = total_real_steps
        bounds, acc = [], 0.0
        for stage in config.stages:
            acc += stage.real_share
            bounds.append(round(acc * total_real_steps))
        self.stage_ends = bounds
        count = len(config.stages) if config.mode == "stages" else 1
        self.real_steps = [0] * count
        self.virtual_steps = [0] * count
        self.score: float | None = None

    def stage(self, real_steps_done: int) -> int:
        if self.config.mode == "adaptive":
            return 0
        for i, end in enumerate(self.stage_ends):
            if real_steps_done < end:
                return i
        return len(self.stage_ends) - 1

    def virtual_fraction(self, real_steps_done: int) -> float:
        cfg = self.config
        if cfg.mode == "stages":
            return cfg.stages[self.stage(real_steps_done)].virtual_fraction
        below, above = cfg.adaptive_virtual_fractions
        assert cfg.target_score is not None
        good = self.score is not None and self.score >= cfg.adaptive_high * cfg.target_score
        return above if good else below

    def next_source(self, real_steps_done: int) -> str:
        """``"virtual"`` while the stage's virtual share is below its target, else ``"real"``.

        A stage opens with a real rollout, so the world model and its start latents have fresh
        real data before the first imagined step.
        """
        fraction = self.virtual_fraction(real_steps_done)
        i = self.stage(real_steps_done)
        done = self.real_steps[i] + self.virtual_steps[i]
        if fraction <= 0.0 or self.real_steps[i] == 0:
            return "real"
        return "virtual" if self.virtual_steps[i] / done < fraction else "real"

    def record(self, source: str, steps: int, real_steps_done_before: int) -> None:
        i = self.stage(real_steps_done_before)
        if source == "virtual":
            self.virtual_steps[i] += steps
        else:
            self.real_steps[i] += steps

    def observe_score(self, score: float) -> None:
        self.score = score

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"curriculum_mode": self.config.mode}
        for i, (real, virtual) in enumerate(zip(self.real_steps, self.virtual_steps, strict=True)):
            out[f"stage{i + 1}_real_steps"] = real
            out[f"stage{i + 1}_virtual_steps"] = virtual
        return out
