"""The command line reads and answers alike everywhere (issue 25): one name for
the database option, an exit code that means one thing, help that is whole at
80 columns (what a pipe gets), errors headed by what they are about, and
output that the next command takes back."""

from __future__ import annotations

import json
import socket

import pytest
import typer
import yaml

from flowforge.cli.main import app
from tests.cli.test_cli import EXAMPLES, flowforge
from tests.cli.test_help import _commands


@pytest.fixture
def env(tmp_path):
    return {"FLOWFORGE_DATABASE_URL": f"sqlite:///{tmp_path / 'runs.db'}",
            "FLOWFORGE_KNOWLEDGE_URL": f"sqlite:///{tmp_path / 'kb.db'}",
            "FLOWFORGE_REGISTRY_URL": f"sqlite:///{tmp_path / 'registry.db'}",
            "FLOWFORGE_REGISTRY_SEARCH": "text", "COLUMNS": "80"}


def test_serve_on_a_port_in_use_exits_1_not_the_waiting_code(env):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = flowforge("serve", "--port", str(port), env=env)
    assert proc.returncode == 1, proc.stderr
    assert f"127.0.0.1:{port} is already in use" in proc.stderr and "--port" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_every_database_option_is_spelled_db():
    spelled = {}
    for path, command in _commands(typer.main.get_command(app)):
        for param in getattr(command, "params", []):
            if param.name == "db":
                spelled[" ".join(path)] = [*param.opts, *param.secondary_opts]
    assert {"serve", "run", "runs list", "users create", "secrets set", "kb add", "kb search",
            "worker", "chat", "research"} <= set(spelled)
    assert {tuple(names) for names in spelled.values()} == {("--db",)}


def test_the_old_spellings_still_work_but_are_not_shown(env, tmp_path):
    other = f"sqlite:///{tmp_path / 'other.db'}"
    created = flowforge("users", "create", "zed", "--database-url", other, env=env)
    assert created.returncode == 0, created.stderr
    listed = json.loads(flowforge("users", "list", "--db", other, "--json", env=env).stdout)
    assert [user["name"] for user in listed] == ["zed"]
    base = flowforge("kb", "create", "notes", "--url", f"sqlite:///{tmp_path / 'k2.db'}",
                     env=env)
    assert base.returncode == 0, base.stderr
    assert "notes" in flowforge("kb", "list", "--db", f"sqlite:///{tmp_path / 'k2.db'}",
                                env=env).stdout
    assert "notes" not in flowforge("kb", "list", env=env).stdout      # not the default store
    for command in (("serve",), ("kb", "add"), ("users", "create")):
        shown = flowforge(*command, "--help", env=env).stdout
        assert "--database-url" not in shown and "--url" not in shown and "--db" in shown


@pytest.mark.parametrize("args", [
    ("runs", "list"), ("runs", "show", "abc"), ("users", "list"), ("secrets", "list"),
    ("kb", "list"), ("serve",), ("run", str(EXAMPLES / "branch_join.yaml")),
    ("schedules", "list"),
])
def test_an_invalid_database_url_is_a_usage_error(env, args):
    proc = flowforge(*args, "--db", "mysql://db.example/flowforge", env=env)
    assert proc.returncode == 2, proc.stderr
    assert "unsupported" in proc.stderr and "URL 'mysql://db.example/flowforge'" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("command", [("serve",), ("kb", "add"), ("run",), ("worker",)])
def test_help_at_80_columns_shows_every_option_whole(env, command):
    shown = flowforge(*command, "--help", env=env).stdout
    found = dict(_commands(typer.main.get_command(app)))[command]
    assert "…" not in shown
    assert all(len(line) <= 80 for line in shown.splitlines()), shown
    for param in found.params:
        if not getattr(param, "hidden", False):
            assert all(name in shown for name in param.opts), (param.opts, shown)
    words = " ".join(shown.split())
    for param in found.params:             # each option's text is there, whole
        if param.help and not getattr(param, "hidden", False):
            assert " ".join(param.help.split()) in words, param.help


def test_the_runs_list_is_whole_sentences_without_the_docstrings_line_breaks(env):
    shown = flowforge("runs", "--help", env=env).stdout
    assert "Stored runs: list, show, cancel, approve or reject, resume." in shown
    listing = shown[shown.index("Commands:"):].splitlines()[1:]
    entries: list[list[str]] = []
    for line in listing:
        if line.startswith("  ") and not line.startswith("    "):
            entries.append([line])
        elif line.strip():
            entries[-1].append(line)
    runs = dict(_commands(typer.main.get_command(app)))[("runs",)]
    assert len(entries) == len(runs.commands)
    for lines in entries:
        name = lines[0].split()[0]
        first = runs.commands[name].help.strip().split("\n\n")[0]
        assert " ".join(" ".join(lines).split()[1:]) == " ".join(first.split())
        for line, after in zip(lines, lines[1:]):    # a line ends only where the next
            assert len(line) + 1 + len(after.split()[0]) > 78, lines   # word did not fit
                                                     # (click keeps a 2-column margin)
    resume = flowforge("runs", "resume", "--help", env=env).stdout
    assert "unique prefix" in resume


def test_errors_that_are_not_about_run_inputs_are_not_headed_so(env):
    url = env["FLOWFORGE_DATABASE_URL"]
    assert flowforge("users", "create", "alice", env=env).returncode == 0
    status = flowforge("runs", "list", "--status", "done", env=env)
    grant = flowforge("users", "grant", "alice", "server_file", env=env)
    name = flowforge("users", "create", "two words", "--db", url, env=env)
    for proc, says in ((status, "--status 'done': use one of"),
                       (grant, "did you mean 'server_files'"),
                       (name, "name 'two words'")):
        assert proc.returncode == 2, proc.stderr
        assert says in proc.stderr and "run inputs" not in proc.stderr
    ids = []
    while True:       # two runs whose ids share a first character: an ambiguous prefix
        ran = flowforge("run", str(EXAMPLES / "branch_join.yaml"), "-i", "amount=5",
                        "--json", env=env)
        ids.append(json.loads(ran.stdout)["run_id"])
        common = [i for i in ids if i[0] == ids[-1][0]]
        if len(common) > 1:
            break
    ambiguous = flowforge("runs", "show", ids[-1][0], env=env)
    assert ambiguous.returncode == 2 and "is ambiguous" in ambiguous.stderr
    assert "run inputs" not in ambiguous.stderr
    missing = flowforge("run", str(EXAMPLES / "branch_join.yaml"), "-q", env=env)
    assert missing.returncode == 2 and "invalid run inputs" in missing.stderr   # that one is


def test_blocks_show_prints_yaml_that_blocks_add_takes_back(env, tmp_path):
    definition = tmp_path / "long.yaml"
    long_text = ("Counts the words of a text and says how long its sentences are, for "
                 "editors who want short sentences in every paragraph of a long report")
    definition.write_text(f"""
id: long_words
name: Long words
description: {long_text}
execution_type: python
input_schema: {{type: object, properties: {{text: {{type: string, description: "{long_text}"}}}}}}
source_code: |
  async def execute(inputs, context):
      words = inputs["text"].split()  # a comment long enough to pass eighty columns, surely
      return {{"words": len(words)}}
examples:
  - {{inputs: {{text: a b c}}, outputs: {{words: 3}}}}
""")
    assert flowforge("blocks", "add", str(definition), env=env).returncode == 0
    shown = flowforge("blocks", "show", "long_words", env=env)
    assert shown.returncode == 0, shown.stderr
    (tmp_path / "shown.yaml").write_text(shown.stdout)
    again = flowforge("blocks", "add", str(tmp_path / "shown.yaml"), env=env)
    assert again.returncode == 0, again.stderr
    assert "added long_words" in again.stdout
    as_json = json.loads(flowforge("blocks", "show", "long_words", "--json", env=env).stdout)
    assert yaml.safe_load(shown.stdout) == as_json          # nothing wrapped or cut
    assert long_text in shown.stdout and "  # a comment long enough" in shown.stdout


def test_an_error_quotes_what_was_typed_brackets_and_all(env):
    """Errors are text, not markup: `[dev]` in a name the user typed is not a
    style tag to drop (it was: "secret name 'key'" for `key[a]`)."""
    assert flowforge("users", "create", "alice", env=env).returncode == 0
    ran = flowforge("run", str(EXAMPLES / "branch_join.yaml"), "--import", "plugins[dev].py",
                    env=env)
    grant = flowforge("users", "grant", "alice", "server[files]", env=env)
    shown = flowforge("blocks", "show", "summary[v2]", env=env)
    secret = flowforge("secrets", "set", "key[a]", env=env)
    for result, says in ((ran, "--import plugins[dev].py: no such file"),
                         (grant, "unknown capability 'server[files]'"),
                         (shown, "no block 'summary[v2]'"),
                         (secret, "secret name 'key[a]'")):
        output = result.stdout + result.stderr
        assert result.returncode in (1, 2) and says in output, output


def test_what_a_run_stored_is_shown_as_it_is_brackets_and_all(env, tmp_path):
    """Outputs, inputs and file names are data, not markup: a model's "[docs]"
    or "[bold]" is shown, not taken for a style and dropped (`runs show`
    printed "see  and this as written")."""
    document = tmp_path / "draft[v2].yaml"
    said = "see [docs] and [bold]this[/bold] as written"
    document.write_text(yaml.safe_dump({"version": 1, "id": "brackets", "blocks": [
        {"id": "reply", "type": "response", "with": {"message": said}}]}))
    checked = flowforge("validate", str(document), env=env)
    assert checked.returncode == 0, checked.stderr
    assert "draft[v2].yaml: workflow 'brackets'" in " ".join(
        (checked.stdout + checked.stderr).split())
    ran = flowforge("run", str(document), "--json", env=env)
    shown = flowforge("runs", "show", json.loads(ran.stdout)["run_id"], env=env)
    assert shown.returncode == 0, shown.stderr
    # inputs, output and outputs (a narrow terminal wraps them: compare the words)
    output = shown.stdout + shown.stderr
    assert " ".join(output.split()).count(said) == 3, output
