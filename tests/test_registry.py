"""The registry's champion routine, shared by both promotion paths (a fake client: no MLflow needed)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from frugalrl.config import PromotionConfig
from frugalrl.tracking import registry


class FakeClient:
    """The few MlflowClient calls the promotion paths make, on in-memory versions and aliases."""

    def __init__(self):
        self.aliases: dict[str, str] = {}
        self.tags: dict[str, dict[str, str]] = {}

    def set_registered_model_alias(self, name, alias, version):
        self.aliases[alias] = str(version)

    def get_model_version_by_alias(self, name, alias):
        if alias not in self.aliases:
            raise RuntimeError(f"no alias {alias}")
        version = self.aliases[alias]
        return SimpleNamespace(version=version, tags=self.tags.get(version, {}))

    def set_model_version_tag(self, name, version, key, value):
        self.tags.setdefault(str(version), {})[key] = value

    def set_tag(self, run_id, key, value):
        pass

    def log_metric(self, run_id, key, value):
        pass


@pytest.fixture
def client(monkeypatch):
    fake = FakeClient()
    monkeypatch.setattr(registry, "registry_client", lambda: fake)
    calls = []
    original = registry.challenge

    def spy(c, name, version):
        calls.append(version)
        return original(c, name, version)

    monkeypatch.setattr(registry, "challenge", spy)
    fake.calls = calls
    return fake


def test_challenge_aliases_challenger_and_returns_the_champion():
    fake = FakeClient()
    assert registry.challenge(fake, "m", "1") is None
    assert fake.aliases == {"challenger": "1"}
    fake.set_registered_model_alias("m", "champion", "1")
    assert registry.challenge(fake, "m", "2").version == "1"
    assert fake.aliases == {"challenger": "2", "champion": "1"}


def test_promote_if_better_uses_the_champion_routine(client):
    assert registry.promote_if_better("m", "1", 50.0)["reason"] == "first model: no champion yet"
    client.set_model_version_tag("m", "1", "frugalrl.score", "50.0")
    decision = registry.promote_if_better("m", "2", 40.0)
    assert decision["promoted"] is False and decision["champion_version"] == "1"
    assert registry.promote_if_better("m", "3", 60.0)["promoted"] is True
    assert client.calls == ["1", "2", "3"] and client.aliases == {"challenger": "3", "champion": "3"}


def test_gate_promotion_uses_the_champion_routine(client):
    gate = PromotionConfig(test="welch", min_episodes=3)
    first = registry.gate_promotion("m", "1", "run1", [10.0, 11.0, 12.0], 7, gate)
    assert first["promoted"] is True and client.aliases["champion"] == "1"
    assert json.loads(client.tags["1"]["frugalrl.eval_returns"]) == [10.0, 11.0, 12.0]
    other_seeds = registry.gate_promotion("m", "2", "run2", [90.0, 91.0, 92.0], 8, gate)
    assert other_seeds["promoted"] is False and "other seeds" in other_seeds["reason"]
    better = registry.gate_promotion("m", "3", "run3", [90.0, 91.0, 92.0], 7, gate)
    assert better["promoted"] is True and better["champion_score"] == pytest.approx(11.0)
    assert client.calls == ["1", "2", "3"] and client.aliases == {"challenger": "3", "champion": "3"}
