"""`flowforge validate` finds what used to surface only at run time (issue 25):
a field a block does not give, an invalid nested workflow, a model that
cannot be called.  Each is exit code 2 with a located message from
`validate`, and a run that stops before its first block."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

import flowforge
from flowforge.errors import ValidationFailed
from flowforge.providers.scripted import register_script, unregister_script
from tests import in_process
from tests.cli.test_cli import ROOT

KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")

RAN: list[str] = []


@flowforge.function("knows_first")
def _first() -> dict:
    RAN.append("first")
    return {"ok": True}


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The command line (in this process: tests/in_process.py), in an environment
    without any provider key (a developer's or CI machine may have one)."""
    return in_process.flowforge(*args, env=env, unset=KEYS, cwd=ROOT)


@pytest.fixture
def no_keys(monkeypatch):
    for name in KEYS:
        monkeypatch.delenv(name, raising=False)


# -- a field a block does not give --------------------------------------------

ASSESS = """\
    id: assess-typo
    inputs: {amount: {type: number}}
    blocks:
      - {id: assess, type: set, with: {amount: "{{input.amount}}", vip: true}}
      - {id: reply, type: response, with: {message: "Amount: {{assess.amout}}"}}
    """


def test_a_missing_output_field_fails_validate_and_run_with_did_you_mean(tmp_path):
    path = write(tmp_path, "assess.yaml", ASSESS)
    expected = ("blocks[1].with.message: block 'assess' has no output 'amout' in "
                "{{assess.amout}} - did you mean 'amount'?; its outputs: amount, vip")
    for command in (["validate", str(path)],
                    ["run", str(path), "-i", "amount=3", "--no-store", "--json"]):
        proc = cli(*command)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert expected in " ".join(proc.stderr.split()), proc.stderr
        assert proc.stdout == ""                     # nothing ran, no result printed


def test_a_pipeline_reads_a_missing_field_as_null_and_validate_warns(tmp_path, monkeypatch):
    """The seed's Pipeline JSON: a missing field of a known node resolves to
    None there, so it is a located warning (exit 0), not a refusal."""
    from flowforge.registry import Registry, set_registry

    monkeypatch.setenv("FLOWFORGE_REGISTRY_SEARCH", "text")
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    registry = Registry.open(url)
    set_registry(registry)
    try:
        path = tmp_path / "p.json"
        path.write_text('{"id": "p", "nodes": ['
                        '{"id": "n1", "block_id": "math_stats", "inputs": {"numbers": [1, 2]}},'
                        '{"id": "n2", "block_id": "text_clean", '
                        '"inputs": {"text": "{{n1.average}}"}}], "edges": []}')
        proc = cli("validate", str(path), env={"FLOWFORGE_REGISTRY_URL": url,
                                               "FLOWFORGE_REGISTRY_SEARCH": "text"})
        assert proc.returncode == 0, proc.stderr
        warning = " ".join(proc.stderr.split())
        assert "warning: " in warning and "blocks[1].with.text: block 'n1' has no output " \
            "'average'" in warning, proc.stderr
    finally:
        set_registry(None)
        registry.close()


# -- nested workflows ------------------------------------------------------------

CHILD = """\
    id: greeter
    inputs: {name: {type: string}}
    blocks:
      - {id: hello, type: set, with: {text: "hi {{input.name}}"}}
      - {id: answer, type: response, with: {message: "{{helo.text}}"}}
    """
PARENT = """\
    id: parent
    inputs: {names: {type: array}}
    blocks:
      - id: each
        type: parallel
        with: {for_each: "{{input.names}}"}
        blocks:
          - {id: greet, type: workflow, with: {workflow: greeter.yaml,
                                               inputs: {name: "{{loop.item}}"}}}
      - {id: out, type: response, with: {message: "{{each.results}}"}}
    """


def test_an_invalid_nested_file_fails_validate_located_in_both(tmp_path):
    write(tmp_path, "greeter.yaml", CHILD)
    parent = write(tmp_path, "parent.yaml", PARENT)
    expected = ("greeter.yaml: blocks[1].with.message: unknown block 'helo' in {{helo.text}} "
                "- did you mean 'hello'? (used by parent.yaml blocks[0].blocks[0] 'greet')")
    proc = cli("validate", str(parent))
    assert proc.returncode == 2
    assert expected in " ".join(proc.stderr.split()), proc.stderr
    proc = cli("run", str(parent), "-i", 'names=["a", "b"]', "--no-store")
    assert proc.returncode == 2 and expected in " ".join(proc.stderr.split()), proc.stderr
    assert "RuntimeError" not in proc.stdout + proc.stderr


async def test_a_run_of_a_parent_with_an_invalid_child_never_starts(tmp_path):
    write(tmp_path, "greeter.yaml", CHILD)
    parent = write(tmp_path, "parent.yaml", PARENT)
    with pytest.raises(ValidationFailed, match="used by parent.yaml"):
        await flowforge.run(str(parent), {"names": ["a"]}, storage=False)


@pytest.mark.parametrize("change, where, words", [
    ({"inputs: {name: \"{{loop.item}}\"}": "inputs: {nme: \"{{loop.item}}\"}"},
     "blocks[0].blocks[0].with.inputs.nme", "'greeter.yaml' declares no input 'nme' - did you "
                                            "mean 'name'?"),
    ({"inputs: {name: \"{{loop.item}}\"}": "inputs: {}"},
     "blocks[0].blocks[0].with.inputs", "'greeter.yaml' needs input 'name'"),
    ({"workflow: greeter.yaml": "workflow: greter.yaml"},
     "blocks[0].blocks[0].with.workflow", "nested workflow file not found"),
])
def test_a_nested_block_meets_the_child_document(tmp_path, change, where, words):
    write(tmp_path, "greeter.yaml", CHILD.replace("helo", "hello"))
    text = PARENT
    for old, new in change.items():
        text = text.replace(old, new)
    with pytest.raises(ValidationFailed) as caught:
        flowforge.load(write(tmp_path, "parent.yaml", text))
    problems = [str(p) for p in caught.value.problems]
    assert any(p.startswith(f"{where}: ") and words in p for p in problems), problems


def test_a_nested_workflows_outputs_are_known_to_the_parent(tmp_path):
    write(tmp_path, "greeter.yaml", CHILD.replace("helo", "hello"))
    parent = write(tmp_path, "p.yaml", """\
        id: p
        blocks:
          - {id: g, type: workflow, with: {workflow: greeter.yaml, inputs: {name: bob}}}
          - {id: out, type: response, with: {message: "{{g.answr.message}}"}}
        """)
    proc = cli("validate", str(parent))
    assert proc.returncode == 2
    assert "blocks[1].with.message: block 'g' has no output 'answr' in {{g.answr.message}} - " \
           "did you mean 'answer'?" in " ".join(proc.stderr.split()), proc.stderr
    parent.write_text(parent.read_text().replace("answr", "answer"))
    assert flowforge.run_sync(str(parent), {}, storage=False).outputs == {
        "out": {"message": "hi bob", "status": 200}}


def test_a_workflow_that_includes_itself_is_validated_once(tmp_path):
    path = write(tmp_path, "self.yaml", """\
        id: self
        blocks:
          - {id: again, type: workflow, with: {workflow: self.yaml}}
        """)
    assert flowforge.load(path).id == "self"


# -- models ------------------------------------------------------------------------

MODELS = """\
    id: models
    blocks:
      - {id: first, type: function, with: {function: knows_first}}
      - {id: ask, type: llm, after: [first], with: {prompt: hi, model: MODEL}}
    """


@pytest.mark.parametrize("model, words", [
    ("openai/gpt-4o-mini", "blocks[1].with.model: model 'openai/gpt-4o-mini': no API key "
                           "found - set the OPENAI_API_KEY environment variable"),
    ("scripted/missing-rules.yaml", "blocks[1].with.model: model 'scripted/missing-rules.yaml':"
                                    " scripted rules file not found: missing-rules.yaml"),
    ("local/missing-model.gguf", "blocks[1].with.model: model 'local/missing-model.gguf': local "
                                 "model 'missing-model.gguf' is neither 'smollm2' nor an "
                                 "existing GGUF file"),
])
def test_a_model_that_cannot_be_called_fails_validate(tmp_path, model, words):
    path = write(tmp_path, "models.yaml", MODELS.replace("MODEL", model))
    proc = cli("validate", str(path))
    assert proc.returncode == 2, proc.stdout
    assert words in " ".join(proc.stderr.split()), proc.stderr


def test_a_run_missing_a_key_fails_before_its_first_block(tmp_path, no_keys):
    RAN.clear()
    path = write(tmp_path, "models.yaml", MODELS.replace("MODEL", "openai/gpt-4o-mini"))
    result = flowforge.run_sync(str(path), {}, storage=False)
    assert result.status == "failed" and result.blocks == {} and RAN == []
    assert "set the OPENAI_API_KEY environment variable" in result.error
    proc = cli("run", str(path), "--no-store")
    assert proc.returncode == 2
    assert "blocks[1].with.model: model 'openai/gpt-4o-mini': no API key found" in \
        " ".join(proc.stderr.split()), proc.stderr


def test_a_missing_rules_file_fails_the_run_before_its_first_block(tmp_path):
    RAN.clear()
    path = write(tmp_path, "models.yaml", MODELS.replace("MODEL", "scripted/gone.yaml"))
    proc = cli("run", str(path), "--no-store")
    assert proc.returncode == 2 and "scripted rules file not found: gone.yaml" in proc.stderr
    with pytest.raises(ValidationFailed, match="scripted rules file not found"):
        flowforge.run_sync(str(path), {}, storage=False)
    assert RAN == []


@pytest.mark.parametrize("where, document", [
    ("defaults.model", {"defaults": {"model": "anthropic/claude-sonnet-4-5"}}),
    ("defaults.fallback[0]", {"defaults": {"fallback": ["google/gemini-2.5-flash"]}}),
    ("budget.on_exceed.downgrade",
     {"budget": {"tokens": 10, "on_exceed": {"downgrade": "openai/gpt-4o-mini"}}}),
    ("blocks[0].with.fallback[0]", {"fallback": ["anthropic/claude-sonnet-4-5"]}),
])
def test_every_model_string_of_the_document_is_checked_before_the_run(no_keys, where,
                                                                       document):
    register_script("knows_ok", lambda messages, tools: "fine")
    try:
        block = {"id": "ask", "type": "llm",
                 "with": {"prompt": "hi", "model": "scripted/knows_ok",
                          **({"fallback": document.pop("fallback")} if "fallback" in document
                             else {})}}
        if where.startswith("defaults"):
            block["with"].pop("model")
        result = flowforge.run_sync({"id": "m", **document, "blocks": [block]}, {},
                                    storage=False)
        assert result.status == "failed" and result.blocks == {}, result.error
        assert result.error.startswith(f"{where}: model '"), result.error
        assert "no API key found - set the" in result.error
    finally:
        unregister_script("knows_ok")


def test_a_block_that_brings_its_own_key_needs_no_provider_key(tmp_path):
    path = write(tmp_path, "own.yaml", MODELS.replace(
        "model: MODEL}", "model: openai/gpt-4o-mini, api_key: '{{env.TEAM_KEY}}'}"))
    proc = cli("validate", str(path))
    assert proc.returncode == 0, proc.stderr


def test_a_model_override_replaces_the_documents_models(no_keys):
    register_script("knows_ok", lambda messages, tools: "fine")
    try:
        doc = {"id": "o", "blocks": [{"id": "ask", "type": "llm",
                                      "with": {"prompt": "hi", "model": "openai/gpt-4o"}}]}
        result = flowforge.run_sync(doc, {}, storage=False, model="scripted/knows_ok")
        assert result.status == "succeeded", result.error
        assert result.results["ask"]["content"] == "fine"
    finally:
        unregister_script("knows_ok")


def test_validate_checks_keys_against_the_documents_env_too(tmp_path):
    path = write(tmp_path, "models.yaml", MODELS.replace("MODEL", "openai/gpt-4o-mini")
                 .rstrip() + "\n    env: {OPENAI_API_KEY: sk-from-the-document}\n")
    proc = cli("validate", str(path))
    assert proc.returncode == 0, proc.stderr
