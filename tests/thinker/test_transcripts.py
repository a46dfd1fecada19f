"""The transcripts in examples/build/ are what the code does today."""

from __future__ import annotations

import pytest

from tests.script_modules import load_module
from tests.thinker.conftest import EXAMPLES


def _recorder():
    return load_module(EXAMPLES / "record.py", "build_record")


RECORDER = _recorder()


@pytest.mark.parametrize("name", list(RECORDER.INTENTS))
async def test_the_committed_transcript_matches_a_fresh_recording(name, monkeypatch):
    monkeypatch.chdir(EXAMPLES.parents[1])
    fresh = await RECORDER.record(name)
    committed = (EXAMPLES / f"{name}.transcript.md").read_text(encoding="utf-8")
    assert fresh == committed, f"re-record with: python examples/build/record.py ({name})"
    assert "## Pipeline JSON" in fresh and "status: **succeeded**" in fresh
