"""Fixtures for the applications' tests: one knowledge layer per session with
the example policies and the offline web pages indexed (local embeddings),
a fresh run database per test, and scripted models that play a plan."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
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


@contextmanager
def _registered(prefix: str, build: Callable[..., Any]) -> Iterator[Callable[..., Any]]:
    """make(*args) -> ("scripted/<name>", the script `build(*args)` made), each
    registered as a scripted model for the test and removed after it."""
    names: list[str] = []

    def make(*args: Any, **options: Any) -> tuple[str, Any]:
        script = build(*args, **options)
        name = f"{prefix}_{len(names)}_{id(script)}"
        register_script(name, script)
        names.append(name)
        return f"scripted/{name}", script

    try:
        yield make
    finally:
        for name in names:
            unregister_script(name)


@pytest.fixture
def plan():
    """make(*steps) -> ("scripted/<name>", its Plan)."""
    with _registered("chat_plan", lambda *steps: Plan(list(steps))) as make:
        yield make


@pytest.fixture
def research_model():
    """make(scores, **options) -> ("scripted/<name>", its ResearchScript)."""
    from tests.apps.research_script import ResearchScript

    with _registered("research", ResearchScript) as make:
        yield make
