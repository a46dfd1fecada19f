"""Every command and code block of the README, and of the sections that moved
from it into the manual's guides, runs here, as written (the habit FastAPI
keeps with docs_src/): a promise the documentation makes is a test.

Each fenced block is matched to one check below by its page and its first
line.  Every README block has a check, or `test_every_block_is_checked`
fails; in a guide, a block marked `<!-- checked by tests/test_readme.py -->`
is one of these (tests/docs runs the guides' other blocks, and refuses a
marked block that no check here claims).  Shell blocks run in a scratch folder
that holds `examples/` and `.venv` (links to this checkout's), with their own
database, so they run exactly as a new user would type them after `make demo`."""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
MARK = "<!-- checked by tests/test_readme.py -->"


def blocks_of(page: str) -> list[tuple[str, str]]:
    """(language, text) of the README's blocks, or of a guide's marked blocks."""
    text = (ROOT / page).read_text(encoding="utf-8")
    prefix = "" if page == "README.md" else re.escape(MARK) + r"\n"
    return [(m.group(1), m.group(2)) for m in
            re.finditer(prefix + r"^```(\w*)\n(.*?)^```$", text, flags=re.S | re.M)]


def _block(first_line: str, page: str = "README.md") -> str:
    found = [text for _, text in blocks_of(page) if text.startswith(first_line)]
    assert len(found) == 1, f"{page} has {len(found)} blocks starting {first_line!r}"
    return found[0]


GUIDES = "docs/guides/"
PYTHON, WORKFLOWS, APPROVALS = (GUIDES + "python.md", GUIDES + "workflows.md",
                                GUIDES + "approvals.md")
KNOWLEDGE, CHAT, RESEARCH = (GUIDES + "knowledge-bases.md", GUIDES + "rag-chat.md",
                             GUIDES + "research.md")
SERVER, SHARED, SCALING = (GUIDES + "server.md", GUIDES + "shared-server.md",
                           GUIDES + "scaling-out.md")
DEVELOPING = GUIDES + "developing.md"
#: page -> the first line(s) of each block checked here
CHECKED = {
    "README.md": ["make demo", "source .venv/bin/activate", "version: 1\nid: branch-join",
                  "run "],
    PYTHON: ["import asyncio"],
    WORKFLOWS: ["tools:"],
    APPROVALS: ["version: 1\nid: refund-approval", "flowforge run refund.yaml"],
    KNOWLEDGE: ["flowforge kb add policies"],
    CHAT: ["flowforge chat --once", "import asyncio", '{"answer":'],
    SERVER: ["KEY=$(flowforge users create alice"],
    SCALING: ["export REDIS_PASSWORD="],
    SHARED: ["flowforge users grant alice"],
    RESEARCH: ["flowforge research", "[  0%] question: started"],
    DEVELOPING: ["src/flowforge/"],
}


def claims(page: str, text: str) -> bool:
    """Whether a check here takes this block of that page."""
    return any(text.startswith(start) for start in CHECKED.get(page, []))


def test_every_block_is_checked():
    for page, starts in CHECKED.items():
        blocks = blocks_of(page)
        unchecked = [text.split("\n")[0] for _, text in blocks if not claims(page, text)]
        assert unchecked == [], f"{page}: blocks without a check in tests/test_readme.py: " \
                                f"{unchecked}"
        for start in starts:
            _block(start, page)                   # each check finds exactly its block
        assert all(lang for lang, _ in blocks), f"{page}: every block names its language"
    marked = {str(path.relative_to(ROOT)) for path in (ROOT / GUIDES).glob("*.md")
              if MARK in path.read_text(encoding="utf-8")}
    assert marked <= set(CHECKED), f"marked blocks nobody checks: {marked - set(CHECKED)}"
    # 18 blocks when they all lived in the README; the chain commands now run in
    # their guide (tests/docs, with the export's node types), and the README's
    # example run is one more here
    assert sum(len(blocks_of(page)) for page in CHECKED) == 18


@pytest.fixture
def scratch(tmp_path, flowforge_bin):
    """A folder like the checkout a new user has: examples/ and .venv, and an
    environment whose databases are the test's own.  Its `flowforge` is the
    CLI forked from one process (tests/forked_cli.py); the first run's block
    activates .venv and so runs the installed command itself."""
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parents[1])
    env = {**os.environ, "PATH": f"{flowforge_bin}:{Path(sys.executable).parent}:"
                                 f"{os.environ['PATH']}",
           "FLOWFORGE_DATABASE_URL": f"sqlite:///{tmp_path / 'flowforge.db'}",
           "FLOWFORGE_KNOWLEDGE_URL": f"sqlite:///{tmp_path / 'knowledge.db'}",
           "FLOWFORGE_SECRET_KEY_FILE": str(tmp_path / "secret.key"), "COLUMNS": "200"}
    return tmp_path, env


def _bash(script: str, cwd: Path, env: dict, timeout: float = 240
          ) -> subprocess.CompletedProcess:
    """Run a block with bash; done when bash exits (what it left running in the
    background - a server, workers - is killed then), its output read from files so
    a background process holding the pipe open cannot stall the test."""
    import tempfile

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(["bash", "-e", "-c", script], cwd=cwd, env=env, text=True,
                                   stdout=out, stderr=err, start_new_session=True)
        try:
            process.wait(timeout=timeout)
        finally:
            try:
                os.killpg(process.pid, signal.SIGKILL)     # what the script left behind
            except ProcessLookupError:
                pass
            process.wait()
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(process.args, process.returncode, out.read(),
                                           err.read())


def test_setup_make_demo_answers_and_make_test_is_this_suite():
    block = _block("make demo")
    assert re.findall(r"^make (\w+)", block, flags=re.M) == ["demo", "test"]
    demo = subprocess.run(["make", "demo"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert demo.returncode == 0, demo.stderr[-2000:]
    assert "refund" in demo.stdout.lower() and "details: flowforge runs show" in demo.stdout
    # The embedded model's answer does not loop on one sentence until max_tokens
    # (at llama.cpp's repeat_penalty 1.0 it said one sentence eight times).
    sentences = re.split(r"(?<=[.!?])\s+", " ".join(demo.stdout.split()))
    said = collections.Counter(s for s in sentences if len(s.split()) >= 5)
    assert not said or said.most_common(1)[0][1] < 3, said.most_common(1)
    # `make test` is what runs this file: running it here would recurse; its
    # recipe must be the suite itself.
    dry = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True)
    assert ".venv/bin/python -m pytest" in dry.stdout


def test_after_setup_the_first_run(scratch):
    """The first run answers as the README shows it (its run id and timings aside)."""
    folder, env = scratch
    result = _bash(_block("source .venv/bin/activate"), folder, env)
    assert result.returncode == 0, result.stderr

    def stable(text: str) -> list[str]:
        text = re.sub(r"\b[0-9a-f]{32}\b", "<run id>", text)
        text = re.sub(r"\b\d+(\.\d+)? ms\b", "<time>", text)
        return [" ".join(line.split()) for line in text.strip().splitlines()]

    shown = stable(_block("run "))
    assert [line for line in stable(result.stdout) if line in shown] == shown


def test_the_workflow_example_runs_as_shown():
    import flowforge

    text = _block("version: 1\nid: branch-join")
    result = flowforge.run_sync(flowforge.load_text(text), {"amount": 1500}, storage=False)
    assert result.outputs == {"reply": {"message": "Order for guest: manual review",
                                        "status": 200}}


def test_the_python_snippet_runs(scratch):
    folder, env = scratch
    (folder / "snippet.py").write_text(_block("import asyncio", PYTHON))
    result = subprocess.run([sys.executable, "snippet.py"], cwd=folder, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("succeeded {'easy': {'message': 'Easy to read (1 words per")
    assert "run_finished" in result.stdout and lines[-1].startswith("succeeded {'easy'")


def test_the_agent_tools_fragment_is_valid():
    from flowforge.blocks.agent import AgentConfig

    tools = yaml.safe_load(_block("tools:", WORKFLOWS))["tools"]
    config = AgentConfig.model_validate({"prompt": "p", "tools": tools})
    kinds = [entry if isinstance(entry, str) else entry.kind for entry in config.tools]
    assert kinds == ["lookup_order", "http", "mcp", "knowledge_search", "workflow"]


def test_the_refund_example_pays_only_when_approved(scratch):
    """Issue 25: the README's refund-approval, run both ways.  Rejected (the
    README's commands with `reject`), only `refused` answers: `cool_off` is not
    on the chosen route, and `paid`, after it, is skipped with it although it
    also reads `quote`, which ran.  Approved, `cool_off` then `paid` run."""
    import asyncio
    import time

    import flowforge

    folder, env = scratch
    (folder / "refund.yaml").write_text(_block("version: 1\nid: refund-approval", APPROVALS))
    commands = _block("flowforge run refund.yaml", APPROVALS).replace(
        'flowforge runs approve $RUN manager --comment "within policy" || test $? -eq 3   '
        '# cool_off waits', 'flowforge runs reject $RUN manager --comment "not this time"')
    assert "runs reject" in commands
    result = _bash(commands + "\nflowforge runs show $RUN --json", folder, env)
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout.strip().splitlines()[-1])
    blocks = {block["block_id"]: block["status"] for block in record["blocks"]}
    assert record["status"] == "succeeded"
    assert blocks == {"quote": "succeeded", "manager": "succeeded", "cool_off": "skipped",
                      "paid": "skipped", "refused": "succeeded"}
    assert record["outputs"] == {"refused": {"message": "Refund refused", "status": 200}}
    assert "Refunded" not in json.dumps(record)

    async def approved() -> Any:
        url = env["FLOWFORGE_DATABASE_URL"]
        document = yaml.safe_load(_block("version: 1\nid: refund-approval", APPROVALS))
        [cool_off] = [b for b in document["blocks"] if b["id"] == "cool_off"]
        cool_off["with"]["seconds"] = 0.1          # an hour is the README's; a test sleeps less
        first = await flowforge.run(document, {"amount": 100}, storage=url)
        assert first.status == "waiting"
        return await flowforge.resume(first.run_id, storage=url, decisions={
            "manager": {"decision": "approve", "by": "alice", "at": time.time(),
                        "comment": None}})

    done = asyncio.run(approved())
    assert done.status == "succeeded"
    assert done.outputs == {"paid": {"message": "Refunded 120 EUR", "status": 200}}
    assert {bid: r.status for bid, r in done.blocks.items()} == {
        "quote": "succeeded", "manager": "succeeded", "cool_off": "succeeded",
        "paid": "succeeded", "refused": "skipped"}


def test_the_knowledge_base_commands(scratch):
    folder, env = scratch
    result = _bash(_block("flowforge kb add policies", KNOWLEDGE), folder, env)
    assert result.returncode == 0, result.stderr
    assert "refund" in result.stdout.lower()


def _port_8000_free() -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", 8000)) != 0


def test_the_server_walkthrough(scratch):
    folder, env = scratch
    script = _block("KEY=$(flowforge users create alice", SERVER)
    if not _port_8000_free():          # as written when it can be; another port otherwise
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            script = script.replace("8000", str(sock.getsockname()[1]))
    result = _bash(script, folder, env, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    start = result.stdout.index('{"owner"')      # curl prints no newline after a body
    saved, _ = json.JSONDecoder().raw_decode(result.stdout[start:])
    assert saved["id"] == "branch-join" and saved["version"] == 1
    assert "event: run_finished" in result.stdout
    assert '"status": "succeeded"' in result.stdout
    assert "<title>flowforge</title>" in result.stdout     # the web app at /


def test_the_capability_commands(scratch):
    folder, env = scratch
    created = _bash("flowforge users create alice", folder, env)
    assert created.returncode == 0, created.stderr
    result = _bash(_block("flowforge users grant alice", SHARED), folder,
                   {**env, "ALICES_OPENAI_KEY": "sk-readme-example"})
    assert result.returncode == 0, result.stderr
    assert "granted server_files to user 'alice'" in result.stdout
    assert "stored secret OPENAI_API_KEY for alice" in result.stdout
    assert "sk-readme-example" not in result.stdout


def test_the_research_command_prints_the_sample_shown(scratch):
    folder, env = scratch
    result = _bash(_block("flowforge research", RESEARCH), folder, env)
    assert result.returncode == 0, result.stderr[-3000:]

    def session_free(text: str) -> list[str]:
        text = re.sub(r"session [0-9a-f]{32}", "session <id>", text)
        return [line.rstrip() for line in text.strip().splitlines()]

    shown = session_free(_block("[  0%] question: started", RESEARCH))
    assert session_free(result.stderr) + session_free(result.stdout) == \
        shown[:11] + shown[12:]                  # the blank line between them is stdout's


def test_the_layout_names_real_folders():
    for line in _block("src/flowforge/", DEVELOPING).splitlines()[1:]:
        names = line.split("  ")[1].strip().split() if line.startswith("  ") else []
        for name in names:
            assert (ROOT / "src/flowforge" / name).exists(), name


def test_the_chat_commands(scratch):
    folder, env = scratch
    result = _bash(_block("flowforge chat --once", CHAT), folder, env, timeout=420)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "EU law gives 14 days" in result.stdout
    assert "KB Refund Policy" in result.stdout and "WEB EU right of withdrawal" in result.stdout
    second = json.loads(next(line for line in result.stdout.splitlines()
                             if line.startswith('{"answer"')))
    assert second["tool_calls"][0] == "knowledge_base_search"
    assert second["tool_calls"][-1] == "generate_response"
    assert "2 messages" in result.stdout                 # `chat sessions` lists both


def test_the_chat_python_snippet_runs(scratch):
    folder, env = scratch
    (folder / "chat.py").write_text(_block("import asyncio", CHAT))
    result = subprocess.run([sys.executable, "chat.py"], cwd=folder, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("Every product has a two-year warranty")
    assert lines[1] == "[('kb', 'Warranty')]" and lines[2] == "True"


def test_the_chat_answer_shape_is_the_api_reply():
    from flowforge.server.routes.chat import ChatReply

    shown = json.loads(_block('{"answer":', CHAT))
    assert set(shown) == set(ChatReply.model_fields)
    ChatReply.model_validate(shown)


def test_the_scale_out_commands(scratch):
    folder, env = scratch
    script = _block("export REDIS_PASSWORD=", SCALING)
    # Redis on loopback only, with a password that every command after it uses
    assert '--bind 127.0.0.1' in script and '--requirepass "$REDIS_PASSWORD"' in script
    assert 'FLOWFORGE_BROKER_URL="redis://:$REDIS_PASSWORD@127.0.0.1' in script
    for port in ("6379", "8000"):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            script = script.replace(port, str(sock.getsockname()[1]))
    # the workers need a moment to connect; the queued run waits for them meanwhile
    result = _bash(script, folder, {**env, "FLOWFORGE_QUEUE": "readme"}, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "queued run" in result.stderr
    assert "Order for guest: manual review" in result.stdout


def test_the_approval_walkthrough(scratch):
    """The budget/wait/approval document validates, and the commands stop at
    the approval, continue on `runs approve` and stop again at the long wait."""
    folder, env = scratch
    document = _block("version: 1\nid: refund-approval", APPROVALS)
    flowforge_load = __import__("flowforge").load
    flowforge_load(yaml.safe_load(document))
    (folder / "refund.yaml").write_text(document)
    result = _bash(_block("flowforge run refund.yaml", APPROVALS)
                   + "\nflowforge runs show $RUN --json", folder, env)
    assert result.returncode == 0, result.stderr
    first = json.loads((folder / "run.json").read_text())
    assert first["status"] == "waiting" and first["blocks"]["manager"]["status"] == "waiting"
    shown = result.stdout
    assert "manager" in shown and "cool_off" in shown
    record = json.loads(shown.strip().splitlines()[-1])
    assert record["status"] == "waiting"
    blocks = {block["block_id"]: block for block in record["blocks"]}
    manager = blocks["manager"]
    assert manager["output"]["by"] and manager["output"]["comment"] == "within policy"
    assert blocks["cool_off"]["status"] == "waiting" and blocks["paid"]["status"] == "pending"
