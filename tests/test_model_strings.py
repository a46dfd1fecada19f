"""Model strings are read in one place (flowforge.model_strings): the policy,
the providers, pricing, tracing and the exporters see the same parts."""

from __future__ import annotations

import re
from pathlib import Path

import flowforge
from flowforge.model_strings import parse_model

SRC = Path(flowforge.__file__).resolve().parent


def test_the_parts_of_a_model_string():
    assert (parse_model("openai/gpt-4o").provider, parse_model("openai/gpt-4o").name) == \
        ("openai", "gpt-4o")
    ollama = parse_model("openai-compatible/ollama/llama3.1")
    assert (ollama.provider, ollama.server, ollama.served_name) == \
        ("openai-compatible", "ollama", "llama3.1")
    bare = parse_model("gpt-4o")
    assert (bare.provider, bare.name, bare.server) == ("", "", "")
    assert parse_model("local/models/x.gguf").name == "models/x.gguf"     # a path stays whole
    assert parse_model("openai/gpt-4o").server == ""


def test_no_module_splits_a_model_string_by_hand():
    """`model.partition("/")` in a second place is a second reading of the
    format, free to drift from this one."""
    hand = re.compile(r"model\w*\)?\.(partition|split|rpartition)\(\s*['\"]/['\"]")
    found = [f"{path.relative_to(SRC)}:{number}"
             for path in SRC.rglob("*.py") if path.name != "model_strings.py"
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if hand.search(line)]
    assert found == []
