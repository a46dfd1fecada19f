"""`flowforge run agent.json`, `flowforge import` and `flowforge export --format agent`."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from flowforge.cli.main import app
from flowforge.tools.network import allowing_private_network

from tests.apps.chains_receiver import EXAMPLES, receiver  # noqa: F401 - a fixture

MOVIE = EXAMPLES / "movie_script.json"
RULES = EXAMPLES.parent / "scripted" / "movie_script.rules.yaml"
runner = CliRunner()


def invoke(*args, env=None):
    return runner.invoke(app, [str(a) for a in args], env=env)


def test_run_an_agent_file_with_a_file_input(receiver, tmp_path):
    script = tmp_path / "script.txt"
    script.write_text("FADE IN: a robot named Unit 7 meets Mia.\n", encoding="utf-8")
    with allowing_private_network():
        result = invoke("run", MOVIE, "--input", f"script=@{script}", "--input",
                        "apiKey=sk-cli-key-987654", "--model", f"scripted/{RULES}", "--json",
                        "--no-store", env={"FLOWFORGE_CHAIN_BASE_URL": receiver.url})
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["status"] == "succeeded"
    assert "sk-cli-key-987654" not in result.stdout
    sent = [e for e in answer["events"] if e["type"] == "llm_request" and e["block_id"] == "plots"]
    assert sent[0]["request"]["messages"][1]["content"] == \
        "### FADE IN: a robot named Unit 7 meets Mia.\n ###"
    assert receiver.requests[0]["body"]["characters"] == {"character": ["Unit 7", "Mia"]}


def test_file_input_errors_are_clear(tmp_path):
    result = invoke("run", MOVIE, "--input", f"script=@{tmp_path / 'missing.txt'}")
    assert result.exit_code == 2
    assert "--input script=@" in result.output and "no such file" in result.output
    assert "@@" in result.output


def test_import_writes_the_native_workflow_that_runs_the_same(receiver, tmp_path):
    target = tmp_path / "movie.yaml"
    result = invoke("import", MOVIE, "-o", target, "--base-url", receiver.url)
    assert result.exit_code == 0, result.output
    doc = yaml.safe_load(target.read_text(encoding="utf-8"))
    assert [(b["id"], b["type"]) for b in doc["blocks"]] == [
        ("plots", "llm"), ("summary", "llm"), ("characters", "llm"),
        ("parse_characters", "parser"), ("send_result", "http")]
    assert doc["blocks"][4]["with"]["url"] == f"{receiver.url}/prediction/movie-script/result"
    assert "script" in doc["inputs"] and "apiKey" not in doc["inputs"]
    with allowing_private_network():
        ran = invoke("run", target, "-i", "script=A robot.", "--model", f"scripted/{RULES}",
                     "--json", "--no-store")
    assert ran.exit_code == 0, ran.output
    assert len(receiver.requests) == 1


def test_import_reports_located_problems(tmp_path):
    agent = json.loads(MOVIE.read_text(encoding="utf-8"))
    agent["promptChain"][2]["user"] = "Movie script {scrpt}"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(agent), encoding="utf-8")
    result = invoke("import", bad, "--base-url", "http://127.0.0.1:1")
    assert result.exit_code == 2
    assert "promptChain[2] 'characters': unknown variable {scrpt} in `user`" in result.output
    ran = invoke("run", bad, env={"FLOWFORGE_CHAIN_BASE_URL": "http://127.0.0.1:1"})
    assert ran.exit_code == 2 and "unknown variable {scrpt}" in ran.output


def test_export_round_trip_through_files(tmp_path):
    native = tmp_path / "movie.yaml"
    assert invoke("import", MOVIE, "-o", native, "--base-url", "http://127.0.0.1:1"
                  ).exit_code == 0
    exported = tmp_path / "movie.agent.json"
    result = invoke("export", native, "--format", "agent", "-o", exported)
    assert result.exit_code == 0, result.output
    agent = json.loads(exported.read_text(encoding="utf-8"))
    assert [node["name"] for node in agent["promptChain"]] == [
        "plots", "summary", "characters", "parse characters", "send result"]
    again = tmp_path / "again.yaml"
    assert invoke("import", exported, "-o", again).exit_code == 0
    assert yaml.safe_load(again.read_text()) == yaml.safe_load(native.read_text())


def test_export_refuses_other_formats_and_other_blocks(tmp_path):
    assert "unknown --format 'n8n': the export formats are agent" in invoke(
        "export", EXAMPLES.parent / "support.yaml", "--format", "n8n").output
    result = invoke("export", EXAMPLES.parent / "support.yaml", "--format", "agent")
    assert result.exit_code == 2 and "has no prompt-chain equivalent" in result.output


def test_a_key_written_in_the_agent_file_is_used_and_kept_out_of_the_record(tmp_path,
                                                                            monkeypatch):
    from flowforge.blocks import _llm
    from flowforge.providers.base import LLMResponse

    seen = []

    async def fake(model, request, *, options, **_):
        seen.append((model, options.env.get("ANTHROPIC_API_KEY")))
        return LLMResponse(text="ok", model=model)

    monkeypatch.setattr(_llm, "_complete", fake)
    agent = tmp_path / "agent.json"
    agent.write_text(json.dumps({"variables": {"key": "sk-ant-in-the-file-1234", "q": ""},
                                 "promptChain": [
        {"type": "prompt", "name": "ask", "user": "{q}", "apiKey": "{key}", "llm": "claude",
         "model": "claude-3-5-haiku-latest", "output": "a"},
        {"type": "return", "name": "out", "output": ["a"]}]}), encoding="utf-8")
    result = invoke("run", agent, "-i", "q=@@handle", "--json", "--no-store")
    assert result.exit_code == 0, result.output
    assert seen == [("anthropic/claude-3-5-haiku-latest", "sk-ant-in-the-file-1234")]
    answer = json.loads(result.stdout)
    assert answer["outputs"]["out"]["data"] == {"a": "ok"}
    assert answer["results"]["ask"]["content"] == "ok"
    sent = [e for e in answer["events"] if e["type"] == "llm_request"]
    assert sent[0]["request"]["messages"] == [{"role": "user", "content": "@handle"}]
    assert "sk-ant-in-the-file-1234" not in result.stdout
    # a key given on the command line wins over the file's
    seen.clear()
    assert invoke("run", agent, "-i", "key=sk-ant-from-the-command", "--json", "--no-store"
                  ).exit_code == 0
    assert seen == [("anthropic/claude-3-5-haiku-latest", "sk-ant-from-the-command")]


def test_a_key_written_in_a_node_is_a_run_secret_when_the_file_itself_runs(tmp_path,
                                                                           monkeypatch):
    """The seed allows `apiKey: "sk-..."` in a node (issue 26): running the file
    uses it as a run secret (masked, never stored); importing it, which would
    store it, is still refused with the way out."""
    from flowforge.blocks import _llm
    from flowforge.providers.base import LLMResponse

    seen = []

    async def fake(model, request, *, options, **_):
        seen.append(options.env.get("ANTHROPIC_API_KEY"))
        return LLMResponse(text="ok", model=model)

    monkeypatch.setattr(_llm, "_complete", fake)
    literal = "sk-ant-written-in-the-node-5678"
    agent = tmp_path / "agent.json"
    agent.write_text(json.dumps({"variables": {"q": "hi"}, "promptChain": [
        {"type": "prompt", "name": "ask", "user": "{q}", "apiKey": literal, "llm": "claude",
         "model": "claude-3-5-haiku-latest", "output": "a"}]}), encoding="utf-8")
    db = tmp_path / "runs.db"
    result = invoke("run", agent, "--json", "--db", f"sqlite:///{db}")
    assert result.exit_code == 0, result.output
    assert seen == [literal]
    assert literal not in result.stdout
    assert literal.encode() not in db.read_bytes()          # never stored
    imported = invoke("import", agent, "-o", tmp_path / "agent.yaml")
    assert imported.exit_code == 2
    assert "a key written in a chain that is saved or imported would be stored" in \
        imported.output
