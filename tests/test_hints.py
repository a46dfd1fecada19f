""""Did you mean" is written once (flowforge.hints): every message that
suggests a spelling has the same words and the same matcher."""

from __future__ import annotations

from pathlib import Path

import flowforge
from flowforge.hints import closest, did_you_mean

SRC = Path(flowforge.__file__).resolve().parent


def test_the_hint_names_the_closest_option_or_says_nothing():
    assert did_you_mean("retyr", ["retry", "timeout"]) == " - did you mean 'retry'?"
    assert did_you_mean("zzz", ["retry", "timeout"]) == ""
    assert did_you_mean("opnai", ["openai", "google"], 0.5, suffix="/gpt-4o") == \
        " - did you mean 'openai/gpt-4o'?"
    assert closest("inptu", ["input", "vars", "env"]) == "input"


def test_no_module_matches_spellings_on_its_own():
    """A second copy of the matcher (difflib.get_close_matches) or of the words
    drifts from this one: every suggestion goes through flowforge.hints."""
    found = [f"{path.relative_to(SRC)}:{number}"
             for path in SRC.rglob("*.py") if path.name != "hints.py"
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if "get_close_matches" in line or "did you mean '" in line]
    assert found == []
