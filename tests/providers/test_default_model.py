"""The default model (`resolve.default_model`): local/qwen2.5-0.5b wherever its
file is installed, else local/smollm2, said once; FLOWFORGE_DEFAULT_MODEL first
(the suite pins local/smollm2 in tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import flowforge
from flowforge.blocks._llm import choose_model
from flowforge.providers import resolve
from flowforge.providers.local_models import QWEN
from flowforge.apps.thinker.llm import default_build_model

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """No pinned default, an empty model cache, the fallback not yet said."""
    monkeypatch.delenv("FLOWFORGE_DEFAULT_MODEL")
    monkeypatch.delenv("FLOWFORGE_BUILD_MODEL", raising=False)
    monkeypatch.setenv("FLOWFORGE_MODEL_CACHE", str(tmp_path))
    monkeypatch.setattr(resolve, "_FALLBACK_SAID", [])
    return tmp_path


def _install_stand_in(cache: Path) -> None:
    """A file of the model's size (sparse: no 491 MB written); presence is a `stat`."""
    with open(cache / QWEN.file_name, "wb") as handle:
        handle.truncate(QWEN.size)


class _Context:
    defaults: dict = {}


def test_the_installed_qwen_is_the_default_everywhere_a_person_waits(cache, capsys):
    _install_stand_in(cache)
    assert resolve.default_model() == "local/qwen2.5-0.5b"
    assert choose_model(_Context(), None) == "local/qwen2.5-0.5b"      # blocks naming none
    assert default_build_model() == "local/qwen2.5-0.5b"                # build, create-agent
    assert capsys.readouterr().err == ""


def test_without_it_the_fallback_is_smollm2_said_once(cache, capsys):
    assert resolve.default_model() == "local/smollm2"
    assert resolve.default_model() == "local/smollm2"
    said = capsys.readouterr().err
    assert said.count("\n") == 1
    assert "local/qwen2.5-0.5b is not installed, so the default model is local/smollm2" in said
    assert "run `make install`" in said


def test_the_setting_wins_and_a_document_s_model_wins_over_it(cache, monkeypatch):
    _install_stand_in(cache)
    monkeypatch.setenv("FLOWFORGE_DEFAULT_MODEL", "local/smollm2")
    assert resolve.default_model() == "local/smollm2"

    class Named:
        defaults = {"model": "openai/gpt-4o"}

    assert choose_model(Named(), None) == "openai/gpt-4o"


def test_shipped_demo_chat_and_research_name_no_model_so_they_follow_the_default():
    for path in ["examples/support.yaml", "src/flowforge/apps/chat/chat.yaml",
                 *sorted(str(p.relative_to(ROOT))
                         for p in (ROOT / "src/flowforge/apps/research").glob("*.yaml"))]:
        doc = yaml.safe_load((ROOT / path).read_text(encoding="utf-8"))
        assert list(_models(doc)) == [], path


def _models(value):
    """Every `model:` a document names, however deep."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "model":
                yield item
            yield from _models(item)
    elif isinstance(value, list):
        for item in value:
            yield from _models(item)


def test_a_run_naming_no_model_uses_the_default(cache, monkeypatch, tmp_path):
    """End to end: the run's LLM block resolves the default (here pinned to scripted rules)."""
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - reply: from the default\n")
    doc = tmp_path / "w.yaml"
    doc.write_text("version: 1\nid: w\nblocks:\n  - {id: a, type: llm, with: {prompt: hi}}\n")
    monkeypatch.setenv("FLOWFORGE_DEFAULT_MODEL", f"scripted/{rules}")
    result = flowforge.run_sync(doc, {}, storage=False)
    assert result.results["a"]["content"] == "from the default"
    assert result.results["a"]["model"] == f"scripted/{rules}"
