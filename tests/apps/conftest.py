"""Fixtures for the applications' tests: one knowledge layer per session with
the example policies and the offline web pages indexed (local embeddings),
a fresh run database per test, and scripted models that play a plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flowforge.knowledge.api import Knowledge
from flowforge.providers.scripted import register_script, unregister_script
from tests.apps.helpers import Plan

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def knowledge_path(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("kb") / "knowledge.db")


@pytest.fixture
async def knowledge(knowledge_path: str):
    knowledge = await Knowledge.open(f"sqlite:///{knowledge_path}")
    for name, folder in (("policies", "policies"), ("web", "web")):   # shared: every user
        await knowledge.create(name, exist_ok=True, stored_as=f"shared/{name}")
        await knowledge.add_paths(f"shared/{name}", [ROOT / "examples" / folder])
    yield knowledge
    await knowledge.close()


@pytest.fixture
def storage_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


@pytest.fixture
def plan():
    names = []

    def make(*steps: Any) -> tuple[str, Plan]:
        script = Plan(list(steps))
        name = f"chat_plan_{len(names)}_{id(script)}"
        register_script(name, script)
        names.append(name)
        return f"scripted/{name}", script

    yield make
    for name in names:
        unregister_script(name)


@pytest.fixture
def research_model():
    """make(scores, **options) -> ("scripted/<name>", its ResearchScript): a scripted
    research model registered for the test and removed after it."""
    from tests.apps.research_script import ResearchScript

    made = []

    def make(scores=None, **options):
        played = ResearchScript(scores, **options)
        name = f"research_{id(played)}"
        register_script(name, played)
        made.append(name)
        return f"scripted/{name}", played

    yield make
    for name in made:
        unregister_script(name)

