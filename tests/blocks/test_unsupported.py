"""An imported node without a counterpart stays visible: the document
validates with a warning naming it, and a run that reaches it fails that
block with the node's title, type, format and what to do instead."""

from __future__ import annotations

import asyncio

import flowforge
from flowforge.service.loading import load

MAIL = {"id": "send_mail", "type": "unsupported", "name": "Send mail",
        "with": {"format": "n8n", "node_type": "n8n-nodes-base.gmail", "title": "Send mail",
                 "instead": "use an http block calling the Gmail API"}}
MESSAGE = ("node 'Send mail' (n8n-nodes-base.gmail) imported from n8n has no flowforge "
           "counterpart: use an http block calling the Gmail API")


def _doc() -> dict:
    return {"version": 1, "id": "imported", "blocks": [
        {"id": "draft", "type": "set", "with": {"text": "hello"}},
        {**MAIL, "after": ["draft"]},
        {"id": "after_mail", "type": "set", "with": {"sent": "{{send_mail.id}}"}},
        {"id": "other", "type": "response", "with": {"message": "{{draft.text}}"}}]}


def test_validate_accepts_it_and_warns_naming_the_node(tmp_path):
    path = tmp_path / "imported.yaml"
    import yaml
    path.write_text(yaml.safe_dump(_doc()))
    compiled = load(path)
    warnings = [str(w) for w in compiled.graph.warnings]
    assert warnings == [f"blocks[1]: 'send_mail' fails if a run reaches it: {MESSAGE}"]


def test_a_run_that_reaches_it_fails_that_block_with_a_located_message():
    result = asyncio.run(flowforge.run(_doc(), {}, storage=False))
    assert result.status == "failed"
    assert result.blocks["send_mail"].status == "failed"
    assert result.blocks["send_mail"].error == MESSAGE          # the record names the block
    assert result.blocks["after_mail"].status == "skipped"
    assert result.blocks["other"].status == "succeeded"          # the rest still runs


def test_the_cli_validate_prints_the_warning(tmp_path):
    from typer.testing import CliRunner

    from flowforge.cli.main import app

    import yaml
    path = tmp_path / "imported.yaml"
    path.write_text(yaml.safe_dump(_doc()))
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert "send_mail' fails if a run reaches it" in result.output
    assert "Send mail" in result.output


def test_its_words_are_kept_as_written_even_when_they_quote_a_template():
    hint = "an http block with the header `{{secrets.NAME}}` after `flowforge secrets set NAME`"
    doc = {"version": 1, "id": "imported", "blocks": [
        {**MAIL, "with": {**MAIL["with"], "instead": hint}}]}
    compiled = load(doc)                                   # no "a secret may only go..." problem
    assert hint in str(compiled.graph.warnings[0])
    result = asyncio.run(flowforge.run(doc, {}, storage=False))
    assert result.blocks["send_mail"].error.endswith(hint)
