"""One line for a pydantic validation error: the field path, the bad value and what is allowed."""

from __future__ import annotations

import typing
from typing import Any

from pydantic import BaseModel

from frugalrl.config.experiment import ExperimentConfig


def _model_at(path: tuple[Any, ...], root: type[BaseModel]) -> type[BaseModel] | None:
    """The pydantic model that owns the field at ``path`` (for listing allowed keys)."""
    model: type[BaseModel] | None = root
    for key in path[:-1]:
        if model is None or key not in model.model_fields:
            return None
        annotation = model.model_fields[key].annotation
        # ``Stage | None``: the model inside the optional (profile stages are optional sections)
        options = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
        annotation = options[0] if len(options) == 1 else annotation
        model = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    return model


def _describe(error: dict[str, Any], source: str, extra: int, root: type[BaseModel] | None = None) -> str:
    """One line for one pydantic error; ``root`` is the validated model (default ``ExperimentConfig``)."""
    loc = tuple(error.get("loc", ()))
    field = ".".join(str(part) for part in loc) or "<root>"
    value = error.get("input")
    more = f" (and {extra} more problem{'s' if extra > 1 else ''})" if extra else ""
    if error["type"] == "extra_forbidden":
        owner = _model_at(loc, root or ExperimentConfig)
        allowed = ", ".join(owner.model_fields) if owner else "see the docs"
        return f"{source}: {field}: unknown key; allowed keys here: {allowed}{more}"
    if error["type"] == "missing":
        return f"{source}: {field}: required key missing; add it{more}"
    message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
    if loc:
        return f"{source}: {field} = {value!r}: {message}{more}"
    return f"{source}: {message}{more}"
