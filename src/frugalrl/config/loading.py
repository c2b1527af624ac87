"""Reading a config: a YAML file or text, overrides applied, validated into an ``ExperimentConfig``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from frugalrl.config.errors import _describe
from frugalrl.config.experiment import ExperimentConfig
from frugalrl.config.overrides import apply_overrides
from frugalrl.credentials import redact_data
from frugalrl.errors import ConfigError


def validate_config(data: Any, source: str = "<config>") -> ExperimentConfig:
    """Validate a parsed mapping into an ``ExperimentConfig`` or raise a one-line ``ConfigError``."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: top level must be a mapping of keys, got {type(data).__name__}")
    # A credential never enters the config, so nothing recorded from it (params, config.yaml,
    # checkpoints, the hash) holds one; its real value goes by environment (frugalrl.credentials).
    data = redact_data(data)
    try:
        return ExperimentConfig.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        raise ConfigError(_describe(errors[0], source, len(errors) - 1)) from None


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key given twice in one mapping is an error, not "the last wins"."""

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                lines = f"lines {seen[key] + 1} and {key_node.start_mark.line + 1}"
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice ({lines})", key_node.start_mark
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def yaml_mapping(text: str, source: str, what: str = "config") -> dict[str, Any]:
    """Parse YAML ``text`` that must be a non-empty mapping (duplicate keys refused); one-line ``ConfigError``."""
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or ""
        detail = f" ({problem})" if "given twice" in problem else ""
        raise ConfigError(f"{source}: not valid YAML{where}{detail}; fix the syntax") from None
    if data is None:
        raise ConfigError(f"{source}: the {what} is empty; write its keys (see configs/ for examples)")
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: top level must be a mapping of keys, got {type(data).__name__}")
    return data


def read_text_file(path: str | Path, what: str, example: str) -> str:
    """A UTF-8 text file's contents, or a one-line ``ConfigError`` saying what is wrong with the path."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: {what} not found; pass an existing file such as {example}")
    if not path.is_file():
        raise ConfigError(f"{path}: is a directory, not a {what}; pass a file such as {example}")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a UTF-8 text file (binary?); pass a YAML {what}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror}); check its permissions") from None


def load_config(path: str | Path, overrides: list[str] | None = None) -> ExperimentConfig:
    """Read a YAML experiment file, apply overrides, validate."""
    source = str(path)
    data = yaml_mapping(read_text_file(path, "config file", "configs/cartpole-ppo.yaml"), source)
    data = apply_overrides(data, overrides or [], source)
    return validate_config(data, source)


def config_from_yaml_text(text: str, overrides: list[str] | None = None, source: str = "<config>") -> ExperimentConfig:
    """Like ``load_config`` for YAML text (used by pipeline components)."""
    return validate_config(apply_overrides(yaml_mapping(text, source), overrides or [], source), source)
