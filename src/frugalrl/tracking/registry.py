"""The model registry: register a version, then let it challenge the ``champion`` alias.

Two promotion paths share one champion routine (``challenge``): ``promote_if_better``
(pretrained encoders and evaluators: plain score comparison) and ``gate_promotion``
(policies: the statistical gate of ``frugalrl.ops.promotion``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from frugalrl.config import ExperimentConfig, PromotionConfig
from frugalrl.ops.promotion import GateDecision, decide
from frugalrl.tracking.runs import RunTracker
from frugalrl.tracking.store import registry_client


def task_name(env_id: str) -> str:
    """``ALE/Breakout-v5`` -> ``breakout``, ``CartPole-v1`` -> ``cartpole``, ``myenvs:Reach1D-v0`` -> ``reach1d``:
    the prefix of registered names."""
    return env_id.rpartition(":")[2].split("/")[-1].split("-v")[0].lower()


def register_model(
    model_uri: str,
    name: str,
    run_id: str,
    score: float,
    score_name: str,
    tags: dict[str, str] | None = None,
    description: str | None = None,
) -> str:
    """Register ``model_uri`` as a new version of ``name``, tagged with the score promotion compares.

    ``score`` is the evaluation mean return for policies, the held-out Spearman correlation for
    importance evaluators. Returns the new version number.
    """
    import mlflow

    client = registry_client()
    version = mlflow.register_model(model_uri, name, tags={"frugalrl.run_id": run_id, **(tags or {})})
    if description:
        client.update_model_version(name, version.version, description=description)
    client.set_model_version_tag(name, version.version, "frugalrl.score", f"{score:.6f}")
    client.set_model_version_tag(name, version.version, "frugalrl.score_name", score_name)
    return str(version.version)


def challenge(client: Any, name: str, version: str) -> Any | None:
    """Alias ``version`` as ``challenger``; return the current ``champion`` version (``None``: none yet)."""
    client.set_registered_model_alias(name, "challenger", version)
    try:
        return client.get_model_version_by_alias(name, "champion")
    except Exception:  # no alias, or no such model yet: either way there is no champion
        return None


def promote_if_better(
    name: str, version: str, score: float, floors: dict[str, tuple[float, float]] | None = None
) -> dict[str, Any]:
    """Alias ``version`` as ``challenger``; move ``champion`` to it if it clears ``floors`` and beats the champion.

    ``floors`` maps a figure's name to (measured, minimum): a version below any of them never
    becomes champion, not even the first (a throwaway 3-update encoder must not). Returns the
    decision and its evidence. (A statistical gate replaces this for policies.)
    """
    client = registry_client()
    champion = challenge(client, name, version)
    short = {key: (measured, minimum) for key, (measured, minimum) in (floors or {}).items() if not measured >= minimum}
    if short:
        reason = "; ".join(f"{key} {measured:.3g} < {minimum:.3g}" for key, (measured, minimum) in short.items())
        client.set_model_version_tag(name, version, "frugalrl.promotion", f"below the champion floor: {reason}")
        return {
            "promoted": False,
            "reason": f"below the champion floor ({reason}); set in the config",
            "champion_version": str(champion.version) if champion is not None else None,
            "challenger_score": score,
            "champion_score": float(champion.tags.get("frugalrl.score", "nan")) if champion is not None else None,
        }
    if champion is None:
        client.set_registered_model_alias(name, "champion", version)
        return {
            "promoted": True,
            "reason": "first model: no champion yet",
            "champion_version": version,
            "challenger_score": score,
            "champion_score": None,
        }
    champion_score = float(champion.tags.get("frugalrl.score", "-inf"))
    promoted = score > champion_score
    if promoted:
        client.set_registered_model_alias(name, "champion", version)
    return {
        "promoted": promoted,
        "reason": f"challenger {score:.2f} {'>' if promoted else '<='} champion {champion_score:.2f}",
        "champion_version": version if promoted else str(champion.version),
        "challenger_score": score,
        "champion_score": champion_score,
    }


def gate_promotion(
    name: str,
    version: str,
    run_id: str,
    returns: list[float],
    eval_seed: int,
    promotion: PromotionConfig,
    random_returns: Callable[[], list[float]] | None = None,
) -> dict[str, Any]:
    """Alias ``version`` as ``challenger``; move ``champion`` to it only if ``frugalrl.ops.promotion``'s test says so.

    The evaluation returns and their seed are stored as version tags, so the next challenger is
    compared on the same seeds; the decision and its evidence go to the version's tags and to
    the challenger's MLflow run. With no champion yet, ``random_returns()`` (the random policy on
    the same seeds; called only then) is what a first version must beat.
    """
    client = registry_client()
    champion = challenge(client, name, version)
    client.set_model_version_tag(name, version, "frugalrl.eval_returns", json.dumps([round(r, 4) for r in returns]))
    client.set_model_version_tag(name, version, "frugalrl.eval_seed", str(eval_seed))
    if champion is not None and champion.tags.get("frugalrl.eval_seed") != str(eval_seed):
        decision = GateDecision(
            False, f"champion v{champion.version} was evaluated on other seeds: not comparable, champion kept",
            "none", float(sum(returns) / len(returns)), None, None, None, None, None, len(returns), 0,
        )  # fmt: skip
    else:
        theirs = json.loads(champion.tags["frugalrl.eval_returns"]) if champion is not None else None
        baseline = random_returns() if champion is None and random_returns is not None else None
        decision = decide(returns, theirs, promotion, baseline)
    if decision.promoted:
        client.set_registered_model_alias(name, "champion", version)
    client.set_model_version_tag(name, version, "frugalrl.promotion", decision.reason[:5000])
    client.set_tag(run_id, "frugalrl.promotion", decision.reason[:5000])
    client.set_tag(run_id, "frugalrl.promoted", str(decision.promoted).lower())
    for key in ("p_value", "difference", "ci_low", "ci_high"):
        value = getattr(decision, key)
        if value is not None:
            client.log_metric(run_id, f"promotion_{key}", float(value))
    return {
        **decision.as_dict(),
        "champion_version": version if decision.promoted else (str(champion.version) if champion else None),
        "challenger_score": decision.challenger_mean,
        "champion_score": decision.champion_mean if decision.against == "champion" else None,
        "random_score": decision.champion_mean if decision.against == "random policy" else None,
    }


def log_and_register(
    config: ExperimentConfig,
    run_name: str,
    summary: dict[str, Any],
    files: list[Path],
    model: Any,
    kind: str,
    score_key: str,
    score_name: str,
    input_example: Any = None,
    tags: dict[str, str] | None = None,
    floors: dict[str, tuple[float, float]] | None = None,
    task: str | None = None,
) -> dict[str, Any]:
    """One MLflow run for a pretrained model (encoder, evaluator): numeric summary as metrics, ``tags``, the
    files as artifacts, the module as a pickled MLflow PyTorch model carrying ``files[-1]``, then
    registration as ``<task>-<kind>`` (task: the env's, unless given) with ``summary[score_key]`` as its
    score, tagged ``score_name`` (alias ``champion`` moves when it improves)."""
    import mlflow
    import mlflow.pytorch
    import torch

    with RunTracker(config, run_name=run_name) as tracker:
        numeric = {k: v for k, v in summary.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        tracker.log_metrics(numeric, step=0)
        mlflow.set_tags({"frugalrl.dataset_sha256": summary["dataset_sha256"], **(tags or {})})
        for path in files:
            tracker.log_artifact(path, artifact_path=kind)
        info = mlflow.pytorch.log_model(
            model,
            name=kind,
            serialization_format="pickle",
            extra_files=[str(files[-1])],
            input_example=input_example,  # gives the registered model a signature
            pip_requirements=[f"torch=={torch.__version__.split('+')[0]}"],
        )
        run_id = tracker.run_id
    name = f"{task or task_name(config.env.id)}-{kind}"
    score = float(summary[score_key])
    version = register_model(info.model_uri, name, run_id, score, score_name)
    decision = promote_if_better(name, version, score, floors)
    return {"mlflow_run_id": run_id, "model_uri": info.model_uri, "registered_model": name,
            "registered_version": version, "promoted": decision["promoted"],
            "promotion": decision["reason"]}  # fmt: skip
