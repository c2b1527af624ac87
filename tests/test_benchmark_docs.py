"""Every table in docs/benchmarks.md is re-rendered from the rows kept in benchmarks/results/ (issue 19).

Each benchmark script, run with ``--report-only --check``, renders its section from its results
file alone and exits 1 unless the doc holds exactly that text; the claims ledger likewise. A
section nobody can re-render (a hand-edited table, a script that lost its rows) fails here.
"""

from __future__ import annotations

import re
import runpy
import sys

import pytest

from .conftest import REPO

BENCH = REPO / "benchmarks"
DOC = REPO / "docs" / "benchmarks.md"

# script (and what sets an invocation apart) -> (its --report-only arguments beyond --report-only --check, the doc
# sections it renders)
RENDERERS = {
    "env_throughput.py": ([], ["env_throughput"]),
    "ppo_vs_sb3.py": (["--env", "CartPole-v1", "LunarLander-v3"], ["ppo_vs_sb3", "ppo_vs_sb3_lunarlander"]),
    # its rows ran at 100k env steps; at the script's default budget (1M) --report-only skips the env
    "ppo_vs_sb3.py HalfCheetah-v5": (["--env", "HalfCheetah-v5", "--timesteps", "100000"], ["ppo_vs_sb3_halfcheetah"]),
    "offpolicy_vs_sb3.py Pendulum-v1": (["--env", "Pendulum-v1"], ["offpolicy_vs_sb3_pendulum"]),
    "offpolicy_vs_sb3.py CartPole-v1": (["--env", "CartPole-v1"], ["offpolicy_vs_sb3_cartpole"]),
    "offpolicy_vs_sb3.py LunarLander-v3": (["--env", "LunarLander-v3"], ["offpolicy_vs_sb3_lunarlander"]),
    "offpolicy_vs_sb3.py HalfCheetah-v5": (["--env", "HalfCheetah-v5"], ["offpolicy_vs_sb3_halfcheetah"]),
    "offpolicy_step_floor.py": ([], ["offpolicy_step_floor"]),
    "ppo_time_breakdown.py": ([], ["ppo_time_breakdown"]),
    "ppo_step_micro.py": ([], ["ppo_step_micro"]),
    "pivot_vs_ppo.py": ([], ["pivot_vs_ppo"]),
    "selection_signals.py": ([], ["selection_signals"]),
    "pivot_pretrained.py": ([], ["pivot_pretrained"]),
    "pivot_pretrain_stability.py": ([], ["pivot_pretrain_stability"]),
    "mountaincar_pilot.py": ([], ["mountaincar_pilot"]),
    "pivot_labels.py": ([], ["pivot_labels"]),
    "pivot_transfer.py": ([], ["pivot_transfer"]),
    "latent_encoders.py": ([], ["latent_encoders"]),
    "replay_throughput.py": ([], ["replay_throughput"]),
    "rmt_ablation.py": ([], ["rmt_ablation"]),
    "rmt_returns.py": ([], ["rmt_returns"]),
    "tiered_replay_diagnosis.py": ([], ["tiered_replay_diagnosis"]),
    "fractal_vs_residual.py": ([], ["fractal_vs_residual"]),
    "latent_vs_pixel.py": ([], ["latent_vs_pixel"]),
    "pong_head_start.py": ([], ["pong_head_start"]),
    "peft_methods.py": ([], ["peft_methods"]),
    "fusion.py": ([], ["fusion"]),
    "probe_cache.py": ([], ["probe_cache"]),
    "random_atari.py": ([], ["random_atari"]),
    "world_model_quality.py": ([], ["world_model_quality"]),
    "reward_predictability.py": ([], ["reward_predictability"]),
    "atari_throughput.py": ([], ["atari_throughput"]),
    "atari_equal_cpu.py": ([], ["atari_equal_cpu"]),
    "demo_game_equal_cpu.py": ([], ["demo_game_equal_cpu"]),
    "rliable_check.py": ([], ["rliable_check"]),
    "rliable_improvement.py": ([], ["rliable_improvement"]),
    "ledger.py": ([], ["claims_ledger"]),
}


# the ledger reads every results file and re-derives each verdict (about 8 s): make test, not test-fast
SCRIPTS = [pytest.param(s, marks=pytest.mark.slow) if s == "ledger.py" else s for s in sorted(RENDERERS)]


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_doc_section_is_what_the_kept_rows_render(script, monkeypatch, capsys):
    """``python -m benchmarks.<script> --report-only --check``, in this process (torch is imported once for all
    scripts); under ``-m``, ``sys.argv[0]`` is the module's file."""
    module = script.split()[0].removesuffix(".py")
    monkeypatch.setattr(sys, "argv", [str(BENCH / f"{module}.py"), "--report-only", "--check", *RENDERERS[script][0]])
    try:
        runpy.run_module(f"benchmarks.{module}", run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            pytest.fail(str(exc.code))


def test_every_section_of_the_doc_has_a_renderer():
    sections = set(re.findall(r"<!-- BEGIN (\w+) -->", DOC.read_text()))
    rendered = {name for _, names in RENDERERS.values() for name in names}
    assert sections == rendered, f"not rendered: {sorted(sections - rendered)}; missing: {sorted(rendered - sections)}"


def test_rliable_gets_the_runs_the_equal_cpu_table_compares():
    """Each game with 3 runs or more alone; all games together only for a contender on every game, its first
    n seeds on each (n the fewest), human-normalised: rliable takes a runs x games matrix."""
    from benchmarks._atari import human_normalised
    from benchmarks.rliable_check import ALL_GAMES, matrices

    def rows(game, variant, scores):
        return [{"game": game, "variant": variant, "seed": i + 1, "score": s} for i, s in enumerate(scores)]

    boxing, pong = "ALE/Boxing-v5", "ALE/Pong-v5"
    kept = [*rows(boxing, "real", [4.0, 5.0, 3.0, 6.0]), *rows(pong, "real", [-20.0, -19.0, -21.0]),
            *rows(boxing, "stages", [1.0, 2.0, 3.0]), *rows(pong, "stages", [-20.0, -20.0])]  # fmt: skip
    found = matrices(kept)
    assert found[boxing, "real"] == [[4.0], [5.0], [3.0], [6.0]]
    assert found[ALL_GAMES, "real"] == [[human_normalised(pong, p), human_normalised(boxing, b)]  # the table's order
                                        for b, p in [(4.0, -20.0), (5.0, -19.0), (3.0, -21.0)]]  # fmt: skip
    assert (pong, "stages") not in found and (ALL_GAMES, "stages") not in found  # 2 runs: no interval
    assert found[boxing, "stages"] == [[1.0], [2.0], [3.0]]


def test_the_curriculum_line_names_the_difference_and_what_it_shows():
    from benchmarks._equal_cpu import curriculum_lines

    def runs(*scores):
        return [{"score": s} for s in scores]

    game = "ALE/Breakout-v5"
    ahead = curriculum_lines({(game, "stages"): runs(5.0, 6.0, 7.0), (game, "real"): runs(1.0, 2.0, 3.0)}, [game])
    assert len(ahead) == 1 and "+4.00 [" in ahead[0] and "the curriculum ahead" in ahead[0]
    same = curriculum_lines({(game, "stages"): runs(1.0, 4.0, 2.0), (game, "real"): runs(3.0, 1.0, 2.5)}, [game])
    assert "no difference shown" in same[0]
    thin = curriculum_lines({(game, "stages"): runs(5.0), (game, "real"): runs(1.0, 2.0, 3.0)}, [game])
    assert "no interval: 1 run" in thin[0]
    assert curriculum_lines({(game, "real"): runs(1.0, 2.0, 3.0)}, [game]) == []


def test_the_demo_game_section_says_which_contender_is_ahead_and_by_what():
    """The demo's game at equal CPU: a contender is called ahead of pixel PPO only when the intervals are apart."""
    from benchmarks._equal_cpu import contender_table
    from benchmarks.demo_game_equal_cpu import DESCRIPTIONS, verdict_lines

    game = "ALE/RoadRunner-v5"

    def runs(variant, *scores):
        return [{"game": game, "variant": variant, "seed": i + 1, "score": s, "real_steps": 1000,
                 "train_cpu_s": 90.0, "eval_cpu_s": 5.0} for i, s in enumerate(scores)]  # fmt: skip

    by = {(game, "pixel"): runs("pixel", 0.0, 20.0, 10.0, 0.0, 30.0),
          (game, "stages"): runs("stages", 700.0, 650.0, 900.0, 620.0, 800.0),
          (game, "real"): runs("real", 0.0, 900.0, 10.0, 700.0, 5.0)}  # fmt: skip
    _, intervals = contender_table(by, [game], ["pixel", "real", "stages"], DESCRIPTIONS)
    lines = verdict_lines(by, intervals, game)
    stages = next(line for line in lines if line.startswith(f"- {DESCRIPTIONS['stages']} against pixel"))
    real = next(line for line in lines if line.startswith(f"- {DESCRIPTIONS['real']} against pixel"))
    assert "above, intervals apart" in stages
    assert "no difference shown" in real
    assert lines[-1].endswith("pixel 2/5, real 2/5, stages 5/5")  # runs above the published random 11.5
    thin = {key: rows[:2] for key, rows in by.items()}
    assert "not measurable yet" in verdict_lines(thin, {}, game)[1]


def test_the_ledger_derives_the_latent_cost_from_the_equal_cpu_runs(monkeypatch):
    """Issue 31: the RLVR cost row comes from the equal-CPU rows once the curriculum has some, per real step."""
    from benchmarks import ledger

    def row(variant, seed, steps, flops):
        return {
            "protocol": "full-game",
            "cpu_budget_s": 1200.0,
            "stopped_by_cpu_budget": True,
            "game": "ALE/Pong-v5",
            "variant": variant,
            "seed": seed,
            "score": -20.0,
            "real_steps": steps,
            "train_cpu_s": 1200.0,
            "per_run_flops": flops,
            "command": "python -m benchmarks.atari_equal_cpu",
        }

    pixel_only = [row("pixel", 1, 300_000, 6e13), row("real", 1, 1_500_000, 3e13)]
    monkeypatch.setattr(ledger, "rows_of", lambda name: pixel_only if name == "atari_equal_cpu" else [])
    assert ledger.latent_cost_equal_cpu() is None  # no curriculum rows yet: the older derivation stands
    rows = [*pixel_only, row("stages", 1, 1_200_000, 3e13)]
    monkeypatch.setattr(ledger, "rows_of", lambda name: rows if name == "atari_equal_cpu" else [])
    finding = ledger.latent_cost_equal_cpu()
    # a real step of the curriculum: 1200 / 1.2M CPU-s against pixel's 1200 / 300k, a quarter
    assert "training CPU-s 0.250 / 0.250" in finding.measured and "refuted as stated" in finding.verdict
