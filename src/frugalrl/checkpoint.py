"""Atomic checkpoints: write a temp file, fsync, rename. Load with ``weights_only=True``.

A run killed at any instant leaves either the previous checkpoint or the new one, never a
torn file. Everything in a checkpoint is tensors, numbers, strings and containers of them;
an env snapshot (pickled physics state, for exact resumes) travels as a uint8 tensor and is
unpickled only by the run that wrote it (``unpack_bytes``).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from frugalrl.errors import CheckpointError

CHECKPOINT_FILE = "checkpoint.pt"


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Serialise ``state`` with ``torch.save`` and write it atomically."""
    import io

    buffer = io.BytesIO()
    torch.save(state, buffer)
    atomic_write_bytes(Path(path), buffer.getvalue())


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Load a checkpoint written by ``save_checkpoint``; a clear ``CheckpointError`` otherwise."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} not found; train first or pass the run's --out directory")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for truncated or foreign files
        reason = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise CheckpointError(
            f"checkpoint {path} is corrupt or not a frugalrl checkpoint ({reason}); "
            "delete it to start the run over, or restore a copy"
        ) from None
    if not isinstance(state, dict) or "format" not in state:
        raise CheckpointError(f"checkpoint {path} is not a frugalrl checkpoint (no 'format' key)")
    return state


def load_artifact(path: Path, default_name: str, expected_format: str, what: str, fix: str) -> dict[str, Any]:
    """Load a frugalrl file (``policy.pt``, ``evaluator.pt``; a directory means its ``default_name``).

    ``what`` names the file in errors ("policy file"), ``fix`` says how to get a good one.
    """
    path = Path(path)
    if path.is_dir():
        path = path / default_name
    if not path.is_file():
        raise CheckpointError(f"{what} {path} not found; {fix}")
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise CheckpointError(f"{what} {path} is corrupt ({type(exc).__name__}); {fix}") from None
    if not isinstance(blob, dict) or blob.get("format") != expected_format:
        raise CheckpointError(f"{path} is not a frugalrl {what} (format {expected_format!r} expected)")
    return {**blob, "path": path}


def pack_bytes(blob: bytes | None) -> torch.Tensor | None:
    return None if blob is None else torch.frombuffer(bytearray(blob), dtype=torch.uint8).clone()


def unpack_bytes(tensor: torch.Tensor | None) -> bytes | None:
    return None if tensor is None else tensor.numpy().tobytes()
