"""Every config key is explained (issue 55): a description on every field, ``frugalrl config explain``, and
docs/configuration.md as that command renders it."""

from __future__ import annotations

import subprocess
import sys
import typing

import pytest
from pydantic import BaseModel

from frugalrl.cli import main
from frugalrl.config import ExperimentConfig, PPOConfig, explain
from frugalrl.errors import ConfigError
from frugalrl.plugins import SEAMS, registry_for

from .conftest import REPO

DOC = REPO / "docs" / "configuration.md"
REGENERATE = "frugalrl config explain --markdown > docs/configuration.md"


def _models_in(annotation: typing.Any) -> typing.Iterator[type[BaseModel]]:
    """The pydantic models an annotation names, however deep (``list[Stage]``, ``Spec | None``, ``dict[str, Dim]``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _models_in(arg)


def _settings_models() -> dict[str, type[BaseModel]]:
    """Every registered kind's settings model, as ``section kind`` (the PEFT methods' too)."""
    found = {}
    for section in SEAMS:
        registry = registry_for(section)
        for kind in registry.kinds():
            model = registry.entry(kind).settings
            if model is not None:
                found[f"{section} {kind}"] = model
    return found


def _reachable() -> dict[type[BaseModel], str]:
    """Every model reachable from ExperimentConfig and from each registered kind's settings, with where it was met."""
    seen: dict[type[BaseModel], str] = {}
    todo = [(ExperimentConfig, "ExperimentConfig")] + [(m, f"{w} settings") for w, m in _settings_models().items()]
    while todo:
        model, where = todo.pop()
        if model in seen:
            continue
        seen[model] = where
        for field in model.model_fields.values():
            todo += [(inner, model.__name__) for inner in _models_in(field.annotation)]
    return seen


def _undescribed() -> list[str]:
    return sorted(
        f"{model.__module__}.{model.__qualname__}.{name} (met in {where})"
        for model, where in _reachable().items()
        for name, field in model.model_fields.items()
        if not (field.description or "").strip()
    )


def test_every_config_field_has_a_description(capsys):
    fields = sum(len(model.model_fields) for model in _reachable())
    missing = _undescribed()
    with capsys.disabled():
        print(f"\n{fields - len(missing)} of {fields} config fields described ({len(_reachable())} models)")
    assert not missing, f"{len(missing)} config fields have no description=:\n" + "\n".join(missing)


def test_the_walk_sees_the_kinds_settings_and_nested_models():
    reachable = {model.__name__ for model in _reachable()}
    assert {"PivotConfig", "EvaluatorConfig", "KeepFraction", "RMTSettings", "TopKSettings", "TieredSettings"} <= (
        reachable
    )
    assert {"ScoreStage", "StageConfig", "SearchDimension", "PeftTarget", "AdapterSpec", "LowRank"} <= reachable


def test_descriptions_are_one_short_sentence():
    long = sorted(
        f"{model.__qualname__}.{name}: {len(field.description or '')} characters"
        for model in _reachable()
        for name, field in model.model_fields.items()
        if len(field.description or "") > 300 or "\n" in (field.description or "")
    )
    assert not long, "\n".join(long)


# ------------------------------------------------------------------------------------------ explain


def test_explain_a_key_gives_its_description_type_default_and_bounds():
    described = ExperimentConfig.model_fields["eval"].annotation.model_fields["every_steps"].description
    assert explain("eval.every_steps") == [
        "eval.every_steps",
        f"  {described}",
        "  type: int",
        "  default: 0",
        "  allowed: >= 0",
    ]


def test_explain_names_literal_choices_both_bounds_and_registered_kinds():
    assert "  allowed: one of auto, cpu, cuda" in explain("device")
    assert "  allowed: > 0, <= 1.0" in explain("ppo.learning_rate")
    assert "  allowed: float, or auto" in explain("sac.ent_coef")
    assert any(
        line.startswith("  allowed: a registered kind: ") and "pivot" in line for line in explain("selection.kind")
    )
    assert "  required: it has no default" in explain("score_stages.stages[].threshold")


def test_a_list_item_is_found_with_or_without_its_index_and_a_mapping_entry_by_any_key():
    assert explain("latent.curriculum.stages[0].real_share") == explain("latent.curriculum.stages.real_share")
    assert explain("tuning.space.ppo.learning_rate.low")[0] == "tuning.space.<key>.low"
    stage = [line.split()[0] for line in explain("latent.curriculum.stages[1]")]
    assert stage == ["latent.curriculum.stages[].virtual_fraction", "latent.curriculum.stages[].real_share"]
    assert [line.split()[0] for line in explain("peft.methods.lora")] == [
        "peft.methods.lora.rank",
        "peft.methods.lora.alpha",
    ]


def test_explain_a_section_lists_its_keys():
    lines = explain("eval")
    assert lines[0].startswith("eval (section): ")
    keys = [line.split()[0] for line in lines[1:]]
    assert keys == [f"eval.{name}" for name in ExperimentConfig.model_fields["eval"].annotation.model_fields]


def test_explain_every_key_once_with_its_type_and_default():
    lines = explain(None)
    heads = [line.split(" (")[0] for line in lines]
    assert len(heads) == len(set(heads)), "a key (for one set of kinds) is listed once"
    keys = {head.split()[0] for head in heads}
    nested = ["env.atari.frameskip", "latent.curriculum.stages[].real_share", "selection.settings.evaluator.hidden"]
    assert {"seed", "ppo.learning_rate", *nested, "distributed.settings.share", "peft.methods.lora.rank"} <= keys
    assert "ppo.learning_rate (float, default 0.001): " + PPOConfig.model_fields["learning_rate"].description in lines
    controls = "selection.settings.keep_fraction [kinds epochs, random] (float, default 0.35): "
    assert any(line.startswith(controls) for line in lines)


def test_explain_a_kinds_setting_for_the_chosen_kind_or_every_kind_that_has_it():
    pivot = explain("selection.settings.high", {"selection": "pivot"})
    assert pivot[0] == "selection.settings.high (selection.kind pivot)"
    assert "  default: 0.8" in pivot
    headers = [line for line in explain("selection.settings.keep_fraction") if line.startswith("selection.")]
    assert "selection.settings.keep_fraction (selection.kind epochs, random)" in headers
    assert len(headers) == 2  # the signal selectors' keep_fraction, described alike, and the two controls'
    assert explain("distributed.settings.share")[0] == "distributed.settings.share (distributed.kind topk)"
    with pytest.raises(ConfigError, match="not a setting of selection.kind all; kinds that have it: .*pivot"):
        explain("selection.settings.high", {"selection": "all"})


def test_a_chosen_kind_narrows_a_section_to_its_settings():
    lines = explain("selection", {"selection": "random"})
    settings = [line for line in lines if line.startswith("selection.settings.")]
    assert settings == [line for line in settings if "[kinds epochs, random]" in line or "[kind random]" in line]
    assert settings


@pytest.mark.parametrize(
    ("key", "fragment"),
    [
        ("eval.every_step", "did you mean eval.every_steps?"),
        ("ppo.learnig_rate", "did you mean ppo.learning_rate"),
        ("selection.settings.keep_fractio", "selection.settings.keep_fraction"),
        ("nothing_like_it", "`frugalrl config explain` lists every key"),
    ],
)
def test_an_unknown_key_is_one_config_error_naming_close_matches(key, fragment):
    with pytest.raises(ConfigError) as info:
        explain(key)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{key}: not a config key") and fragment in message


def test_an_unknown_kind_is_a_config_error():
    with pytest.raises(ConfigError, match="selection.kind nope: not a registered sample selector"):
        explain("selection.settings", {"selection": "nope"})


def test_the_command_prints_a_key_and_refuses_an_unknown_one_with_exit_2(capsys):
    main(["config", "explain", "selection.settings.keep_fraction", "--set", "selection.kind=random"])
    assert capsys.readouterr().out.startswith("selection.settings.keep_fraction (selection.kind random)\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["config", "explain", "eval.every_step"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "error: eval.every_step: not a config key; did you mean eval.every_steps? "
        "(frugalrl config explain lists every key)"
    )


def test_the_command_takes_only_kind_choices_from_set(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["config", "explain", "ppo", "--set", "ppo.learning_rate=1"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "explain takes only SECTION.kind=KIND" in err and len(err.splitlines()) == 1


def test_explain_of_a_plain_key_imports_no_registry_and_a_light_seam_no_torch():
    code = (
        "import sys; from frugalrl.config import explain; loaded = lambda: [m in sys.modules for m in "
        "('torch', 'gymnasium')]; explain('eval.every_steps'); explain('eval'); explain('ppo.learning_rate'); "
        "print(loaded()); explain('selection.settings.high', {'selection': 'pivot'}); "
        "explain('replay.settings', {'replay': 'tiered'}); explain('meta.settings.interval'); print(loaded()[0])"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert proc.stdout.split() == ["[False,", "False]", "False"]


# ------------------------------------------------------------------------------------------ the page


def test_the_configuration_page_is_what_explain_renders():
    expected = "\n".join(explain(None, markdown=True)) + "\n"
    assert DOC.exists(), f"docs/configuration.md is missing; run: {REGENERATE}"
    assert DOC.read_text(encoding="utf-8") == expected, f"docs/configuration.md is stale; run: {REGENERATE}"


def test_the_page_says_how_it_is_made_and_is_linked():
    assert REGENERATE in DOC.read_text(encoding="utf-8").splitlines()[2]
    assert "(docs/configuration.md)" in (REPO / "README.md").read_text(encoding="utf-8")
    assert "frugalrl config explain" in (REPO / "docs" / "usage.md").read_text(encoding="utf-8")
