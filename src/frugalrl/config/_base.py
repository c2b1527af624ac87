"""The shared ground of every config section: strict models, registered kinds, env ids."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

from frugalrl.errors import EnvError
from frugalrl.strict_numbers import BOOLEAN_NOT_NUMBER, is_number_field


class _Strict(BaseModel):
    """Unknown keys refused; numbers finite (no inf or nan); a boolean is not a number (YAML's
    ``update_epochs: true`` would otherwise train with 1 epoch)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        if isinstance(value, bool) and field is not None and is_number_field(field.annotation):
            raise ValueError(BOOLEAN_NOT_NUMBER)
        return value


def _registered_env(value: str | None, imports: Sequence[str] = ()) -> str | None:
    """``value`` once the modules ``imports`` names (and its own ``module:`` prefix) are imported and gymnasium
    knows it; ``None`` imports the modules alone. A one-line ``ValueError`` otherwise."""
    # why here: gymnasium, slow to load, and the config package imports nothing above it (test_imports.py)
    from frugalrl.envs.registry import ensure_registered, import_env_modules

    try:
        if value is None:
            import_env_modules(imports)
        else:
            ensure_registered(value, imports)
    except EnvError as exc:
        raise ValueError(str(exc)) from None
    return value


def _seam_registry(section: str) -> Any:
    """The ``plugins.Registry`` config section ``section`` names its kinds in (``plugins.SEAMS``)."""
    from frugalrl.plugins import registry_for  # why here: plugins is a layer above config (see its docstring)

    return registry_for(section)


class _RegisteredKind(_Strict):
    """A section whose ``kind`` names a registered technique and whose ``settings`` that technique validates.

    ``settings`` is kept as the kind's validated settings with every default filled in (JSON values), so
    the resolved config (``config.yaml``, the hash) says everything the technique was built with. Settings
    left out or empty stay empty, meaning the kind's defaults: filling them in would import every seam's
    registry (torch, for some) for any config, and ``{}`` read back from a config.yaml must stay ``{}``, or a
    run's config.yaml would hash apart from the config it ran (and its checkpoints would not resume).
    """

    _section: ClassVar[str]  # the config section, which names its registry (frugalrl.plugins.SEAMS)

    @classmethod
    def _registry(cls) -> Any:
        """The ``plugins.Registry`` of this section's kinds."""
        return _seam_registry(cls._section)

    @field_validator("kind", check_fields=False)
    @classmethod
    def _registered(cls, kind: str) -> str:
        cls._registry().entry(kind)  # the registry imports its package's modules on first use
        return kind

    @field_validator("settings", check_fields=False)
    @classmethod
    def _settings(cls, settings: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        if "kind" not in info.data:  # an unknown kind has its own error already
            return settings
        validated = cls._registry().settings_for(info.data["kind"], settings)  # {} too: a kind may require some
        return {} if validated is None or not settings else validated.model_dump(mode="json")

    def built_settings(self) -> Any:
        """``settings`` as the kind's model (what its factory is given), or None for a kind without settings."""
        return self._registry().settings_for(self.kind, self.settings)  # type: ignore[attr-defined]
