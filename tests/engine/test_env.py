"""`{{env.X}}` and provider credentials see the process environment over the
workflow's `env:`, whichever way they are read."""

from __future__ import annotations

import flowforge
from flowforge.engine.runner import EnvView


def test_env_view_layers_process_env_over_the_workflow(monkeypatch):
    monkeypatch.setenv("FF_ENV_BOTH", "process")
    monkeypatch.delenv("FF_ENV_DOC_ONLY", raising=False)
    env = EnvView({"FF_ENV_BOTH": "workflow", "FF_ENV_DOC_ONLY": "doc"})
    assert env.get("FF_ENV_BOTH") == "process" and env["FF_ENV_DOC_ONLY"] == "doc"
    merged = dict(env)                      # what providers receive for credentials
    assert merged["FF_ENV_BOTH"] == "process" and merged["FF_ENV_DOC_ONLY"] == "doc"
    assert "PATH" in merged and "FF_ENV_DOC_ONLY" in env and env.get("NOPE_X") is None


def test_templates_read_both_layers(monkeypatch):
    monkeypatch.setenv("FF_ENV_P", "from-process")
    doc = {"id": "env", "env": {"FF_ENV_W": "from-workflow"}, "blocks": [
        {"id": "a", "type": "set", "with": {"p": "{{env.FF_ENV_P}}", "w": "{{env.FF_ENV_W}}",
                                            "e": "{{env.FF_ENV_W}}!"}}]}
    result = flowforge.run_sync(doc, storage=False)
    # (An expression may not read env since issue 17: the value must stay recognisable.)
    assert result.results["a"] == {"p": "from-process", "w": "from-workflow",
                                   "e": "from-workflow!"}
