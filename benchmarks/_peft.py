"""The PEFT comparison's claims and how its kept rows are read, shared by ``peft_methods`` and the ledger.

``peft_methods`` runs ``frugalrl peft compare`` and renders the table; the claims ledger gives each
PEFT claim of the seed its verdict. Both take the newest comparison's rows (``contest_rows``) and the
same aggregate table (``table_of``) from here, so the section and the ledger read them alike.
"""

from __future__ import annotations

import math
import statistics

from . import _report

# The seed's table (cost %, score %). Its prefix-tuning row has no counterpart here: frugalrl's ``prefix`` is a
# bias shift of a layer's input, W(x + p) + b, not prefix-tuning, so it is not set beside that figure.
CLAIMS = {"lora": (3.2, 98.0), "adapter": (2.8, 95.0), "bitfit": (1.9, 82.0)}
REFERENCE_NAMES = ("full", "none", "scratch")  # not ranked among the parameter-efficient methods


def contest_rows(rows: list[dict]) -> list[dict]:
    """The rows of the newest comparison (config hash and source fingerprint of the last row), one per run
    (target, method, seed): the last kept."""
    if not rows:
        return []
    last = rows[-1]
    mine = [r for r in rows if (r["contest"], r["source_sha256"]) == (last["contest"], last["source_sha256"])]
    by_run = {(r["run"]["target"], r["run"]["method"], r["run"]["seed"]): r for r in mine}
    return list(by_run.values())


def table_of(stored: list[dict]) -> list[dict]:
    """``aggregate`` over the kept runs: the source's return on its own task is the ``none`` runs' (the same
    evaluation episodes as every run's forgetting figure), else its training run's evaluation."""
    from frugalrl.peft.table import aggregate

    runs = [r["run"] for r in stored]
    untrained = [r["source_eval_mean"] for r in runs if r["method"] == "none"]
    head = stored[-1]
    source_return = statistics.median(untrained) if untrained else head["source_return"]
    order = {m: i for i, m in enumerate(head["contenders"])}
    runs.sort(key=lambda r: (head["targets"].index(r["target"]), order.get(r["method"], len(order)), r["seed"]))
    return aggregate(runs, source_return, head["source_train_flops"], head["source_train_s"])


def ranking(table: list[dict], target: str) -> list[dict]:
    """The parameter-efficient methods on ``target``, best median return first."""
    mine = [r for r in table if r["target"] == target and r["method"] not in REFERENCE_NAMES]
    return sorted(mine, key=lambda r: -r["eval_mean"])


def complete(table: list[dict], head: dict, method: str) -> bool:
    """Whether ``method`` and full fine-tuning have every seed on every target."""
    seeds = {(r["target"], r["method"]): r["seeds"] for r in table}
    return all(seeds.get((t, m), 0) >= head["seeds"] for t in head["targets"] for m in (method, "full"))


def claim_finding(stored: list[dict], method: str) -> tuple[str, str, str]:
    """(measured, evidence, verdict) of one PEFT claim of the seed: ``method``'s cost and score claim, or for
    ``best`` whether LoRA ranks first on most targets, with the range over seeds beside its runner-up's."""
    table, head = table_of(stored), stored[-1]
    evidence = (f"{head['seeds']} seeds x {len(head['targets'])} targets x {head['steps']:,} env steps, "
                f"{head['eval_episodes']} evaluation episodes, {len(stored)} of {head['expected_runs']} runs "
                "kept; every method at the config's one `peft.learning_rate`, none tuned")  # fmt: skip
    if method == "best":
        lines, firsts, separated = [], 0, 0
        for target in head["targets"]:
            ranked = ranking(table, target)
            if not ranked:
                continue
            lora = next((i for i, r in enumerate(ranked) if r["method"] == "lora"), None)
            top, second = ranked[0], ranked[1] if len(ranked) > 1 else None
            apart = second is not None and top["eval_low"] > second["eval_high"]
            firsts += lora == 0
            separated += lora == 0 and apart
            rank = "-" if lora is None else f"{lora + 1} of {len(ranked)}"
            lines.append(f"{target}: LoRA ranks {rank}; first {top['method']} {top['eval_mean']:.0f} "
                         f"[{top['eval_low']:.0f}, {top['eval_high']:.0f}]"
                         + (f", second {second['method']} {second['eval_mean']:.0f} [{second['eval_low']:.0f}, "
                            f"{second['eval_high']:.0f}]" if second else ""))  # fmt: skip
        if not all(complete(table, head, m) for m in head["methods"]):
            return "; ".join(lines) or "no runs yet", evidence, "not yet measured (the table is incomplete)"
        most = len(head["targets"]) // 2 + 1
        verdict = ("confirmed" if separated >= most else "not separated (first by median, ranges overlap)"
                   if firsts >= most else "refuted")  # fmt: skip
        return "; ".join(lines), evidence, verdict
    cost_claim, score_claim = CLAIMS[method]
    mine = [r for r in table if r["method"] == method]
    text = "; ".join(
        f"{r['target']}: return {_report.opt(r['return_pct_of_full'], '{:.0f}')}% of full "
        f"({_report.opt(r['drop_recovered_pct'], '{:.0f}')}% of the drop recovered) at "
        f"{_report.opt(r['flops_pct_of_source_training'], '{:.2f}')}% of the source's training FLOPs, "
        f"{_report.opt(r['flops_pct_of_full'], '{:.0f}')}% of full fine-tuning's"
        for r in mine
    )  # fmt: skip
    if not mine or not complete(table, head, method):
        return text or "no runs of it yet", evidence, "not yet measured (the table is incomplete)"
    cheap = [(r["flops_pct_of_source_training"] or math.inf) <= cost_claim for r in mine]
    good = [(r["return_pct_of_full"] or -math.inf) >= score_claim for r in mine]
    holds = [c and g for c, g in zip(cheap, good, strict=True)]
    verdict = (
        "confirmed" if all(holds) else "refuted" if not any(holds) else f"partly ({sum(holds)} of {len(holds)} targets)"
    )
    if not all(holds):  # the claim is "cost X for score Y": say which half failed where
        verdict += f" (the score holds on {sum(good)} of {len(good)} targets, the cost on {sum(cheap)} of {len(cheap)})"
    return text, evidence, verdict


# The frozen-feature transfer claim (RMT: "4-8x faster adaptation"), read from the same runs: ``head_only``
# trains the policy's head on a frozen torso. Defined before reading the figures, from the words:
# a run has adapted at the first env step where the mean of its last ``ADAPTED_WINDOW`` training episodes
# reaches ``ADAPTED_SHARE`` of full fine-tuning's median final evaluation on that target.
ADAPTED_SHARE = 0.9
ADAPTED_WINDOW = 5
TRANSFER_METHODS = ("head_only", "full", "scratch")


def steps_to_adapt(curve: list[list[float]], threshold: float) -> int | None:
    """The env step at which the mean of the last ``ADAPTED_WINDOW`` episodes first reaches ``threshold``."""
    for i in range(len(curve)):
        window = [value for _, value in curve[max(0, i - ADAPTED_WINDOW + 1) : i + 1]]
        if len(window) == ADAPTED_WINDOW and statistics.mean(window) >= threshold:
            return int(curve[i][0])
    return None


def transfer_steps(stored: list[dict]) -> dict[str, dict[str, list[int | None]]]:
    """target -> method (``TRANSFER_METHODS``) -> steps to adapt per seed (None: not within the budget)."""
    head = stored[-1]
    runs = [r["run"] for r in stored]
    out: dict[str, dict[str, list[int | None]]] = {}
    for target in head["targets"]:
        full = [r["eval_mean"] for r in runs if r["target"] == target and r["method"] == "full"]
        if not full:
            continue
        bar = ADAPTED_SHARE * statistics.median(full)
        out[target] = {
            method: [steps_to_adapt(r["curve"], bar) for r in sorted(runs, key=lambda r: r["seed"])
                     if r["target"] == target and r["method"] == method]
            for method in TRANSFER_METHODS
        }  # fmt: skip
    return out


def transfer_finding(stored: list[dict]) -> tuple[str, str, str]:
    """(measured, evidence, verdict) of the frozen-feature transfer claim: the head on a frozen torso against
    full fine-tuning and training from scratch, in env steps to adapt, censored at the budget."""
    head = stored[-1]
    found = transfer_steps(stored)
    budget = head["steps"]

    def said(steps: list[int | None]) -> str:
        reached = [s for s in steps if s is not None]
        if not reached:
            return f"not within {budget:,} steps (0 of {len(steps)} seeds)"
        return f"{statistics.median(reached):,.0f} ({len(reached)} of {len(steps)} seeds)"

    text = "; ".join(
        f"{target}: steps to {ADAPTED_SHARE:.0%} of full fine-tuning's return, median over the seeds that got there: "
        + ", ".join(f"{m} {said(v)}" for m, v in by.items())
        for target, by in found.items()
    )  # fmt: skip
    evidence = (f"the PEFT comparison's runs ({head['env_id']}, {head['seeds']} seeds x {len(head['targets'])} "
                f"changed-dynamics targets x {budget:,} env steps; `head_only` is the frozen torso); adapted = the "
                f"mean of {ADAPTED_WINDOW} consecutive training episodes at {ADAPTED_SHARE:.0%} of full "
                "fine-tuning's median final evaluation")  # fmt: skip
    if not found:
        return "no runs of it yet", evidence, "not yet measured (the table is incomplete)"
    frozen = [s for by in found.values() for s in by["head_only"]]
    names = {"full": "full fine-tuning", "scratch": "training from scratch"}
    did = [name for m, name in names.items() if any(s is not None for by in found.values() for s in by[m])]
    if not any(s is not None for s in frozen) and did:
        verdict = f"refuted (the frozen torso never adapted within the budget; {' and '.join(did)} did)"
    else:

        def censored(steps: list[int | None]) -> float:
            return statistics.median([s if s is not None else budget for s in steps])

        ratios = [censored(by["scratch"]) / censored(by["head_only"]) for by in found.values()]
        verdict = ("confirmed" if min(ratios) >= 4 else "partly" if max(ratios) > 1 else "refuted") + (
            f" (scratch / frozen, censored medians: {', '.join(f'{r:.1f}x' for r in ratios)})")  # fmt: skip
    return text, evidence, verdict
