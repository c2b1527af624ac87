"""``frugalrl peft compare``: every method x every target x every seed, one table.

For each target task and method the source SAC run is fine-tuned with the same seeds and
env-step budget (``finetune``); the references ``peft.references`` names run beside them (``none``:
the source as it is; ``scratch``: SAC from fresh networks on the target). The table gives, per target
and method (medians over seeds): the target return, that return as % of full fine-tuning's and as %
of the drop full fine-tuning recovers over ``none``, the env steps a run needs to reach 90% of full
fine-tuning's final return (from its training curve), training FLOPs and wall-clock as % of full
fine-tuning's and of training the source from scratch, the trainable share of the policy, and
forgetting (the return on the source task after fine-tuning, against the source policy's before).
Files in DIR:

    source/            the source run, when the config names none and the step trains it
    peft_runs.csv      one row per fine-tuning run (written as runs finish: nothing is lost), with its
                       training curve (JSON [[env step, return], ...] of every training episode)
    peft_table.csv     the aggregated table; peft_table.md the same in Markdown
    peft_plot.png      return % vs cost %, one point per method and target
    adapters/TARGET/METHOD/seedN/      each run's adapter.pt (seed 1's for `frugalrl peft apply`) and
                       metrics.jsonl (one row per SAC update)
    best/policy.pt     the best parameter-efficient method's adapted policy (first target), or the source
                       as it is where no method beats it (``registered_method``)
    summary.json       the table, the source's return, the best method, what best/ holds (``best_policy_method``)
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import torch

from frugalrl.algos.sac import TwinCritic, build_sac_actor
from frugalrl.checkpoint import atomic_write_bytes
from frugalrl.config import ExperimentConfig, PeftTarget, load_config, validate_config
from frugalrl.envs.factory import make_vec_env
from frugalrl.errors import ConfigError
from frugalrl.evaluation import evaluate_policy
from frugalrl.nets.policy import ExportedPolicy
from frugalrl.peft.finetune import (
    ACTOR_HEADS,
    CRITIC_HEADS,
    exported,
    finetune,
    from_scratch,
    target_env,
    untrained,
)
from frugalrl.peft.methods import adapt, merged
from frugalrl.peft.source import SourceMissing, SourceRun, load_source
from frugalrl.peft.store import ADAPTER_FILE, apply_adapter, base_policy, save_adapter
from frugalrl.peft.table import (
    RUN_FIELDS,
    TABLE_FIELDS,
    aggregate,
    best_method,
    markdown,
    plot,
    read_runs,
    registered_method,
    write_csv,
)
from frugalrl.policy_store import save_policy
from frugalrl.rundir import check_new_run_dir, start_run_dir, write_json
from frugalrl.tracking.provenance import git_commit, lineage_source
from frugalrl.tracking.runs import RunTracker
from frugalrl.training import train


def check_methods(source: SourceRun, config: ExperimentConfig) -> None:
    """Build every method on copies of the source networks first: a bad option fails before any training."""
    import gymnasium as gym

    for target in config.peft.targets:
        env = make_vec_env(target_env(source.config, target).model_copy(update={"num_envs": 1}), training=False)
        obs_space, action_space = env.single_observation_space, env.single_action_space
        env.close()
        if not isinstance(action_space, gym.spaces.Box):
            raise ConfigError(f"peft target {target.name}: the PEFT comparison needs continuous actions (SAC)")
        actor = build_sac_actor(obs_space, action_space, source.config)
        shapes = {k: tuple(v.shape) for k, v in actor.state_dict().items()}
        wanted = {k: tuple(v.shape) for k, v in source.agent_state["policy"].items()}
        if shapes != wanted:
            raise ConfigError(
                f"peft target {target.name}: its observation/action sizes do not fit the source policy; "
                "pick a sibling task with the same sizes"
            )
        hidden, obs_dim = source.config.policy.hidden, obs_space.shape[0]
        for method, options in config.peft.methods.items():
            adapt(build_sac_actor(obs_space, action_space, source.config), method, options, ACTOR_HEADS)
            if config.peft.adapt_critic:
                adapt(TwinCritic(obs_dim, action_space.shape[0], hidden), method, options, CRITIC_HEADS)


def _job(source_uri: str, config_dict: dict[str, Any], method: str, target_name: str, seed: int, out: str) -> dict:
    """One fine-tuning run in a worker process; writes its metrics.jsonl and adapter, returns its row."""

    config = validate_config(config_dict)
    torch.set_num_threads(max(config.threads, 1))
    source = load_source(source_uri)
    target = next(t for t in config.peft.targets if t.name == target_name)
    where = Path(out) / "adapters" / target_name / method / f"seed{seed}"  # its metrics.jsonl, then its adapter
    if method == "none":
        return untrained(source, config.peft, target, seed).row()
    if method == "scratch":  # no adapter: the whole policy is new
        return from_scratch(source, config.peft, target, seed, out=Path(out) / "scratch" / target_name / f"seed{seed}"
                            ).row()  # fmt: skip
    result = finetune(source, config.peft, method, config.peft.methods[method], target, seed, out=where)
    save_adapter(where / ADAPTER_FILE, method, result.adaptation.options, result.adapter_state)
    return result.row()


def compare(
    config: ExperimentConfig,
    out: Path,
    workers: int = 1,
    resume: bool = False,
    report_only: bool = False,
    pipeline_run_id: str | None = None,
) -> dict[str, Any]:
    """Run the comparison a config's ``peft`` section describes; write DIR; return the summary.

    ``resume`` continues an interrupted comparison in DIR (same config): finished runs are kept,
    the rest run. ``report_only`` writes the table from the runs finished so far, running none.
    ``pipeline_run_id`` tags the MLflow runs (the source's, the comparison's) with their pipeline run.
    """

    peft = config.peft
    if peft is None:
        raise ConfigError("this config has no peft section; see configs/peft-quick.yaml")
    out = Path(out)
    done: list[dict] = []
    if resume or report_only:
        if not (out / "config.yaml").is_file():
            raise ConfigError(f"{out} holds no PEFT comparison to continue; start one without --resume")
        if load_config(out / "config.yaml").hash() != config.hash():
            raise ConfigError(f"{out} was started with another config; continue it with the same config and --set")
        done = read_runs(out / "peft_runs.csv") if (out / "peft_runs.csv").is_file() else []
    elif (out / "peft_runs.csv").exists() or ((out / "config.yaml").is_file() and (out / "source").is_dir()):
        raise ConfigError(f"{out} already holds a PEFT comparison; continue it with --resume or pick a new --out")
    else:
        check_new_run_dir(out)  # a training run's directory, or anything else: nothing in it is written over
        start_run_dir(config, out)
    source_uri, source = peft.source, None
    if source_uri is not None:
        try:
            source = load_source(source_uri)
        except SourceMissing as exc:  # not registered yet: train it, as when no source is named
            print(f"{exc}; training the source policy with this config", flush=True)
    if source is None and (out / "source" / "checkpoint.pt").is_file() and (resume or report_only):
        source_uri = str(out / "source")
        source = load_source(source_uri)
    if source is None:
        train(config.model_copy(update={"peft": None}), out / "source", pipeline_run_id=pipeline_run_id)
        source_uri = str(out / "source")
        source = load_source(source_uri)
    check_methods(source, config)
    before = evaluate_policy(
        exported(source.actor(), source.config, source.config.env), source.config.env, peft.eval_episodes,
        seed=10_000,
    )  # fmt: skip
    if peft.min_source_return is not None and before.mean < peft.min_source_return:
        raise ConfigError(
            f"source policy {source_uri} returns {before.mean:.1f} < peft.min_source_return {peft.min_source_return}; "
            "train it longer (fine-tuning a weak policy compares nothing)"
        )
    finished = {(r["method"], r["target"], r["seed"]) for r in done}
    contenders = [*peft.methods, *peft.references]
    jobs = [(m, t.name, s) for t in peft.targets for m in contenders for s in range(1, peft.seeds + 1)]
    jobs = [] if report_only else [job for job in jobs if job not in finished]
    rows: list[dict] = list(done)
    args = (source_uri, config.to_dict())
    with ProcessPoolExecutor(max(1, workers), mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(_job, *args, m, t, s, str(out)) for m, t, s in jobs]
        for (method, target, seed), future in zip(jobs, futures, strict=True):
            rows.append(future.result())
            write_csv(out / "peft_runs.csv", rows, RUN_FIELDS)
            r = rows[-1]
            print(f"{target:<16} {method:<10} seed {seed}  return {r['eval_mean']:8.1f}  "
                  f"trainable {r['trainable_share']:6.2%}  s {r['train_s']:6.1f}", flush=True)  # fmt: skip
    table = aggregate(rows, before.mean, source.train_flops, source.train_s)
    write_csv(out / "peft_table.csv", table, TABLE_FIELDS)
    atomic_write_bytes(out / "peft_table.md", markdown(table, before.mean, peft.steps).encode())
    plot(table, out / "peft_plot.png")
    best = best_method(table)
    chosen = registered_method(table, best)
    adapted = _export_best(source_uri, out, chosen, peft.targets[0]) if chosen is not None else None
    summary = {
        "source": source_uri,
        "source_return": before.mean,
        "source_train_flops": source.train_flops,
        "source_train_s": source.train_s,
        "references": list(peft.references),
        "steps": peft.steps,
        "seeds": peft.seeds,
        "methods": list(peft.methods),
        "targets": [t.name for t in peft.targets],
        "best_method": best,
        "best_policy_method": chosen,
        "best_policy": str(out / "best") if adapted is not None else None,
        "table": table,
    }
    model_uri = None
    if config.tracking.enabled:
        summary["mlflow_run_id"], model_uri = _log(config, out, table, summary, adapted, pipeline_run_id)
    if adapted is not None:  # best/summary.json names the MLflow model registration picks up (none untracked)
        run_id = summary.get("mlflow_run_id")
        best_summary = _best_summary(adapted[1], source_uri, chosen, peft.targets[0], run_id, model_uri)
        write_json(out / "best" / "summary.json", best_summary)
    write_json(out / "summary.json", summary)
    return summary


def _export_best(source_uri: str, out: Path, method: str, target: PeftTarget) -> tuple[Any, ExperimentConfig] | None:
    """best/: the base policy with the best method's seed-1 adapter for the first target (``method`` ``none``:
    the base policy as it is), as a run directory (policy.pt, config.yaml; ``compare`` adds summary.json)
    that evaluation and registration read."""
    if method == "none":
        policy, config = base_policy(source_uri)
    else:
        adapter = out / "adapters" / target.name / method / "seed1" / ADAPTER_FILE
        if not adapter.is_file():  # a partial comparison (report-only) may not have run it
            return None
        policy, config = apply_adapter(source_uri, str(adapter))
    env = target_env(config, target)  # evaluators of best/ play the task it was adapted to
    policy.spec["env"] = env.model_dump(mode="json")
    config = config.model_copy(update={"env": env})
    best = out / "best"
    best.mkdir(exist_ok=True)
    save_policy(best / "policy.pt", policy, config)
    atomic_write_bytes(best / "config.yaml", config.to_yaml().encode())
    return policy, config


def _best_summary(
    config: ExperimentConfig, source_uri: str, method: str, target: PeftTarget, run_id: str | None, uri: str | None
) -> dict[str, Any]:
    lineage = {"frugalrl.lineage.peft_source": lineage_source(source_uri), "frugalrl.peft.method": method,
               "frugalrl.peft.target": target.name}  # fmt: skip
    return {"env_id": config.env.id, "config_hash": config.hash(), "git_commit": git_commit(),
            "mlflow_run_id": run_id, "model_uri": uri, "lineage": lineage}  # fmt: skip


def _log(
    config: ExperimentConfig, out: Path, table: list[dict], summary: dict, adapted: Any, pipeline_run_id: str | None
) -> tuple[str, str | None]:
    """One MLflow run: each method's figures as metrics, the table, plot and every adapter as artifacts;
    the best adapted policy as an MLflow model, for registration. The run id and that model's URI."""
    import mlflow

    model_uri = None
    with RunTracker(config, run_name=f"{config.name}-peft-compare", pipeline_run_id=pipeline_run_id) as tracker:
        for r in table:
            prefix = f"{r['target']}.{r['method']}"
            keys = ("eval_mean", "return_pct_of_full", "drop_recovered_pct", "flops_pct_of_full", "trainable_pct",
                    "forgetting_pct")  # fmt: skip
            tracker.log_metrics({f"{prefix}.{k}": r[k] for k in keys if r[k] is not None}, step=0)
        tracker.log_metrics({"source_return": summary["source_return"]}, step=0)
        mlflow.set_tag("frugalrl.peft.best_method", str(summary["best_method"]))
        for name in ("peft_table.csv", "peft_runs.csv", "peft_table.md", "peft_plot.png", "config.yaml"):
            tracker.log_artifact(out / name, artifact_path="peft")
        mlflow.log_artifacts(str(out / "adapters"), artifact_path="adapters")
        if adapted is not None:
            policy, adapted_config = adapted
            env = make_vec_env(adapted_config.env.model_copy(update={"num_envs": 1}), training=False)
            example, _ = env.reset(seed=adapted_config.seed)
            served = ExportedPolicy(merged(policy.actor_critic), spec=policy.spec).eval()  # loads without peft
            served.set_spaces(env.single_observation_space, env.single_action_space)
            env.close()
            model_uri = tracker.log_policy(served, example.astype("float32"), out / "best" / "policy.pt")
            for name in ("policy.pt", "config.yaml"):
                tracker.log_artifact(out / "best" / name, artifact_path="best")
        return tracker.run_id, model_uri
