"""Reading the text files a command is given or finds in a run directory: one place, one-line errors.

``summary.json``, ``best.json``, ``mlflow_offline.jsonl``, ``metrics.jsonl`` and the PEFT tables are
written by frugalrl, but a user can hand any file to a command (a folder that is not a run, a copy cut
short, a binary where text was expected). Every reader here turns undecodable, empty or wrongly shaped
content into a ``CheckpointError`` naming the file and what to do, before the caller changes anything.
(``checkpoint.load_artifact`` does the same for torch files.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from frugalrl.errors import CheckpointError


def read_text(path: Path, what: str, fix: str) -> str:
    """``path`` as UTF-8 text; a one-line ``CheckpointError`` when it is missing, a folder or not text."""
    path = Path(path)
    try:
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise CheckpointError(f"{what} {path} does not exist; {fix}") from None
    except IsADirectoryError:
        raise CheckpointError(f"{what} {path} is a folder, not a file; {fix}") from None
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"{what} {path} is not text (byte {exc.start} is not UTF-8); {fix}") from None
    except OSError as exc:
        raise CheckpointError(f"{what} {path} cannot be read ({exc.strerror}); {fix}") from None


def read_json_object(path: Path, what: str, fix: str) -> dict[str, Any]:
    """A JSON file holding one object (``summary.json``, ``best.json``)."""
    text = read_text(path, what, fix)
    if not text.strip():
        raise CheckpointError(f"{what} {path} is empty; {fix}")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CheckpointError(f"{what} {path} is not JSON (line {exc.lineno}: {exc.msg}); {fix}") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{what} {path} holds a JSON {type(data).__name__}, not an object; {fix}")
    return data


def read_json_lines(path: Path, what: str, fix: str, *, last_may_be_cut: bool = True) -> list[dict[str, Any]]:
    """A JSON-lines file of objects (``metrics.jsonl``, the offline buffer). A last line cut by a kill is
    dropped when ``last_may_be_cut``; any other line that is not a JSON object is refused."""
    lines = read_text(path, what, fix).splitlines()
    entries = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            if last_may_be_cut and number == len(lines):
                break
            raise CheckpointError(f"{what} {path}: line {number} is not JSON; {fix}") from None
        if not isinstance(entry, dict):
            raise CheckpointError(f"{what} {path}: line {number} is not a JSON object; {fix}")
        entries.append(entry)
    return entries
