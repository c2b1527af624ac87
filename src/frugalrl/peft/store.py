"""Adapter files: the trained tensors of one method, loadable onto the base policy later.

``adapter.pt`` holds the method, its options and the trainable tensors of the adapted actor
(for LoRA: the low-rank pairs and the heads). ``apply_adapter`` rebuilds the base policy,
adapts it the same way and loads the tensors, which gives the fine-tuned policy's outputs
exactly. The result saves as a normal ``policy.pt`` whose config names the adapter
(``policy.adapter``), so every loader rebuilds it.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import torch

from frugalrl.checkpoint import atomic_write_bytes, load_artifact
from frugalrl.config import AdapterSpec, ExperimentConfig
from frugalrl.errors import CheckpointError
from frugalrl.nets.builders import PolicyParts, register_builder
from frugalrl.nets.policy import ExportedPolicy
from frugalrl.peft.finetune import ACTOR_HEADS, exported
from frugalrl.peft.methods import adapt
from frugalrl.peft.source import load_source, run_directory
from frugalrl.policy_store import load_policy_file
from frugalrl.tracking.artifacts import resolve_artifact

ADAPTER_FORMAT = "frugalrl-adapter-1"
ADAPTER_FILE = "adapter.pt"


def save_adapter(path: Path, method: str, options: dict[str, Any], state: dict[str, torch.Tensor]) -> None:
    buffer = io.BytesIO()
    torch.save({"format": ADAPTER_FORMAT, "method": method, "options": options, "state": state}, buffer)
    atomic_write_bytes(Path(path), buffer.getvalue())


def load_adapter(uri: str) -> dict[str, Any]:
    """An adapter file (a path, its directory, or an MLflow artifact URI)."""
    fix = "pass an adapter.pt written by `frugalrl peft compare`"

    def failed(reason: str) -> str:
        return f"cannot fetch adapter {uri} from MLflow ({reason[:160]}); check the run id and path"

    # The whole download: load_artifact looks for adapter.pt in a directory, as for a local one.
    local = resolve_artifact(uri, None, "adapter", fix, fetch_error=failed)
    return load_artifact(local, ADAPTER_FILE, ADAPTER_FORMAT, "adapter file", fix)


def apply_adapter(base_uri: str, adapter_uri: str) -> tuple[ExportedPolicy, ExperimentConfig]:
    """The base policy (a run directory, policy.pt or MLflow URI of a SAC run) with the adapter loaded."""
    blob = load_adapter(adapter_uri)
    policy, config = base_policy(base_uri)
    if config.policy.adapter is not None:
        raise CheckpointError(
            f"{base_uri} already carries a {config.policy.adapter.method} adapter; pass the base policy"
        )
    spec = AdapterSpec(method=blob["method"], options=blob["options"])
    config = config.model_copy(update={"policy": config.policy.model_copy(update={"adapter": spec})})
    adapted, _ = _rebuild(policy, config)
    missing = set(blob["state"]) - set(adapted.state_dict())
    if missing:
        raise CheckpointError(
            f"adapter {adapter_uri} does not fit policy {base_uri} (unknown tensors {sorted(missing)[:3]})"
        )
    adapted.load_state_dict(blob["state"], strict=False)
    return ExportedPolicy(adapted, spec=policy.spec).eval(), config


def base_policy(base_uri: str) -> tuple[ExportedPolicy, ExperimentConfig]:
    """The policy an adapter applies to: the run's ``policy.pt``, or, for a SAC source kept without one
    (``config.yaml``, ``checkpoint.pt``, ``summary.json``: what ``benchmarks/artifacts`` keeps of the PEFT
    comparison's source), its actor rebuilt from the checkpoint, as every run of the comparison builds it."""
    directory = run_directory(base_uri)
    if directory.is_dir() and not (directory / "policy.pt").is_file() and (directory / "checkpoint.pt").is_file():
        source = load_source(str(directory))
        return exported(source.actor(), source.config, source.config.env), source.config
    return load_policy_file(directory)


def _rebuild(policy: ExportedPolicy, config: ExperimentConfig) -> tuple[torch.nn.Module, Any]:
    import copy

    network = copy.deepcopy(policy.actor_critic)
    spec = config.policy.adapter
    return network, adapt(network, spec.method, spec.options, adapter_heads(config))


def adapter_heads(config: ExperimentConfig) -> list[str]:
    """The output layers the methods treat as heads, for the network ``config`` builds."""
    if config.algo != "sac":
        raise CheckpointError(f"PEFT adapters are built for SAC policies; this policy is {config.algo}")

    return ACTOR_HEADS


def _build_adapter(parts: PolicyParts) -> None:
    """A fine-tuned policy: the adapter its config names, on the freshly built network (weights load after)."""
    spec = parts.config.policy.adapter
    adapt(parts.network, spec.method, spec.options, adapter_heads(parts.config))


register_builder("adapter", _build_adapter)
