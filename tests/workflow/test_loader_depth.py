"""The loader's nesting limit counts structure, not brackets in text.

A document reaches a shared server from anyone, so its nesting is bounded
(workflow/loader.LIMITS.depth).  Real Dify files were refused as "nested
deeper than 100 levels" although they are a few levels deep: their prompts
write `{{#node.field#}}` (the `#` was taken for a comment, leaving `{{`
open) and their code sits in block scalars with brackets that never close
on the same line.  Brackets are structure only where YAML's scanner reads a
flow collection; truly deep documents are still refused, with the place."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowforge.errors import WorkflowError
from flowforge.workflow.loader import LIMITS, parse_text

DEEP_RESEARCHER = Path(__file__).parents[1] / "formats" / "corpus" / "dify" / \
    "Deep_Researcher_On_Dify_.yml"


def _dify_shaped(nodes: int) -> str:
    """The shape of the Deep Researcher file: many nodes whose prompts and code
    hold brackets as text, a few levels deep."""
    parts = ["app:\n  mode: workflow\n  name: shape\nworkflow:\n  graph:\n    nodes:\n"]
    for index in range(nodes):
        parts.append(
            f"    - data:\n"
            f"        instruction: 提取{{{{#17391127{index}.subtitle3#}}}}中的2~6个关键词\n"
            f"        note: a list starts with [ and a dict with {{ in plain text\n"
            f"        code: |\n"
            f"          def main(arg1: str) -> dict:\n"
            f"              items = [\n"
            f"              return {{\"result\": arg1\n"
            f"        query:\n        - '17391127{index}'\n        - subtitle3\n"
            f"      id: '{index}'\n")
    return "".join(parts)


def test_a_dify_shaped_document_with_brackets_in_its_text_loads():
    data = parse_text(_dify_shaped(LIMITS.depth * 2), "shape.yml")
    nodes = data["workflow"]["graph"]["nodes"]
    assert len(nodes) == LIMITS.depth * 2
    assert nodes[0]["data"]["code"].startswith("def main(arg1: str) -> dict:\n    items = [")
    assert nodes[3]["data"]["instruction"] == "提取{{#173911273.subtitle3#}}中的2~6个关键词"


def test_the_real_deep_researcher_file_loads():
    data = parse_text(DEEP_RESEARCHER.read_text(encoding="utf-8"), DEEP_RESEARCHER.name)
    assert len(data["workflow"]["graph"]["nodes"]) > 50


@pytest.mark.parametrize("text, source", [
    ("id: x\nblocks: " + "[" * 5000 + "]" * 5000, "deep.yaml"),
    ("id: x\nblocks: " + "{a: " * 150 + "1" + "}" * 150, "deep.yaml"),
    ("id: x\nblocks:\n" + "".join("  " * i + "- \n" for i in range(150)), "deep.yaml"),
    ('{"id": "x", "blocks": ' + "[" * 5000 + "]" * 5000 + "}", "deep.json"),
    ('{"id": "x", "blocks": ' + "[" * 5000 + "]" * 5000 + "}", "deep.yaml"),
], ids=["flow-sequences", "flow-mappings", "block-sequences", "json", "json-as-yaml"])
def test_a_truly_deep_document_is_still_refused_with_its_place(text, source):
    with pytest.raises(WorkflowError, match=rf"nested deeper than {LIMITS.depth} levels"):
        parse_text(text, source)


def test_nesting_within_the_limit_loads():
    depth = LIMITS.depth - 2
    data = parse_text("a: " + "[" * depth + "1" + "]" * depth + "\n", "ok.yaml")
    data = data["a"]
    for _ in range(depth):
        data = data[0]
    assert data == 1
