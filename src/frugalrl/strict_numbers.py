"""A boolean is not a number: YAML's ``update_epochs: true`` would otherwise train with 1 epoch.

pydantic reads ``True`` as ``1`` for an int or float field. The config sections (``config._base._Strict``)
and every registered kind's ``settings`` model (``plugins.Registry.settings_for``, a user's own included)
refuse it with this check. A leaf module: it imports nothing of frugalrl, so both layers can use it.
"""

from __future__ import annotations

import types
import typing
from typing import Any

BOOLEAN_NOT_NUMBER = "a boolean is not a number here; write the number"


def is_number_field(annotation: Any) -> bool:
    """int or float (or an optional / union of them), not bool."""
    options = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) else ()
    options = options or (annotation,)
    return bool({int, float} & set(options)) and bool not in options


def boolean_numbers(fields: dict[str, Any], values: dict[str, Any]) -> list[str]:
    """The keys of ``values`` that hold a boolean where ``fields`` (a model's ``model_fields``) wants a number."""
    return [key for key, value in values.items()
            if isinstance(value, bool) and key in fields and is_number_field(fields[key].annotation)]  # fmt: skip
