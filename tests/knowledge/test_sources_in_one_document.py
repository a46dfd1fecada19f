"""Two knowledge blocks of one document that sync one base from different
`sources:` would each remove, at every run, what the other stored (the base
mirrors its sources): `validate` refuses that document, located and saying
the fix; the same sources written two ways, or two bases, are fine."""

from __future__ import annotations

import pytest

import flowforge
from flowforge.errors import ValidationFailed


def document(first: str, second: str, *, second_base: str = "shared") -> str:
    return f"""
id: two-searches
blocks:
  - id: policies
    type: knowledge
    with: {{knowledge_base: shared, sources: {first}, query: refund}}
  - id: pages
    type: knowledge
    after: [policies]
    with: {{knowledge_base: {second_base}, sources: {second}, query: refund}}
"""


def test_one_base_synced_from_two_declarations_is_refused_where_the_second_is():
    with pytest.raises(ValidationFailed) as caught:
        flowforge.load_text(document("[examples/policies]", "[examples/web]"))
    (problem,) = caught.value.problems
    assert problem.where == "blocks[1].with.sources"
    assert "'policies' and 'pages' both make knowledge base 'shared' mirror" in problem.message
    assert "examples/policies against examples/web" in problem.message
    assert "give both the same `sources:`, or give each a knowledge base of its own" \
        in problem.message


def test_a_source_more_in_one_block_is_refused_too():
    with pytest.raises(ValidationFailed):
        flowforge.load_text(document("[examples/policies]",
                                     "[examples/policies, examples/web]"))


@pytest.mark.parametrize("first, second, base", [
    ("[examples/policies, examples/web]", "[./examples/web/, examples/policies]", "shared"),
    ("[examples/policies]", "[examples/web]", "pages"),
    ("[examples/policies]", "[examples/web]", "'{{input.base}}'"),
])
def test_the_same_sources_written_otherwise_or_two_bases_are_fine(first, second, base):
    flowforge.load_text(document(first, second, second_base=base))
