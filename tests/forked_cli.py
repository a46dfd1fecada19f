"""The `flowforge` command for the tests that run the guides' and the README's
shell blocks, without a Python start-up per command.

Those blocks call `flowforge` about ninety times per suite run, and each
fresh process spends ~0.4 s of CPU importing the CLI (Python, pydantic's
models, typer, rich) before it does ~0.1 s of work.  Here one process per
test module imports the CLI once and forks a child per command; the
`flowforge` that the blocks find first on PATH is a small script (Python with
no site, ~15 ms) that hands the child its argv, working folder, environment
and standard streams, forwards the signals bash sends it (`kill $!`), and
exits as the child exits.  The child runs the same `flowforge.cli.main:main`
as the installed command, in the command's own folder and environment,
writing to the command's own stdout and stderr: what the blocks see is what
they would see from a fresh process.  (What this does not test, Python's
start-up of the console script, tests/test_readme.py's first run and
tests/cli still do with the real command.)

What a module computes from the environment when it is imported is computed
once, in the server: the server starts with the test's environment
(`COLUMNS`, `PYTHONPATH`), and flowforge reads its `FLOWFORGE_*` settings
when a command runs, not at import.  Anything a command leaves running (a
`flowforge serve &`, workers) is in the child's own process group, which is
ended when its shim goes away, as `_bash` ends the block's own group.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
from pathlib import Path
from typing import Iterator

__all__ = ["forked_cli"]

_HEADER = struct.Struct("!I")

#: the `flowforge` on PATH: connect, hand over, forward signals, exit as the child did
SHIM = '''#!{python} -IS
import json, os, signal, socket, struct, sys
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect({path!r})
fds = []
for fd in (0, 1, 2):
    try:
        os.fstat(fd)
        fds.append(fd)
    except OSError:                       # a closed stream: the child gets /dev/null
        fds.append(os.open(os.devnull, os.O_RDWR))
# bash starts background commands with SIGINT ignored, and so is the command
ignored = [int(n) for n in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
           if signal.getsignal(n) == signal.SIG_IGN]
body = json.dumps({{"argv": sys.argv, "cwd": os.getcwd(), "env": dict(os.environ),
                   "ignored": ignored}}).encode()
socket.send_fds(sock, [struct.pack("!I", len(body)) + body], fds)
for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    if number not in ignored:
        signal.signal(number, lambda n, _: sock.sendall(b"%d\\n" % n))
answer = b""
while not answer.endswith(b"\\n"):
    piece = sock.recv(64)
    if not piece:
        sys.exit("flowforge (tests/forked_cli.py): the command server went away")
    answer += piece
status = int(answer)
if status < 0:                            # killed by a signal: so is this process
    signal.signal(-status, signal.SIG_DFL)
    os.kill(os.getpid(), -status)
sys.exit(status)
'''


#: modules a run, a validate or a server imports on first use (no Python
#: threads, nothing read from the environment at import): imported once in the
#: server.  The HTTP app (~0.6 s of CPU: `serve`) and the knowledge modules
#: with numpy (~0.15 s: `kb`, `chat`, a validate or run of a document that
#: searches) too: numpy's OpenBLAS thread is stopped at a fork and started
#: again in the child by OpenBLAS itself.  onnxruntime, which keeps threads
#: of its own, is left to the commands that embed.
_PRELOAD = ("flowforge.storage.sqlite", "flowforge.storage.migrations",
            "flowforge.workflow.schema_check", "flowforge.apps.chains", "jsonschema",
            "flowforge.server.app", "flowforge.knowledge.search",
            "flowforge.knowledge.embeddings",
            *(f"flowforge.blocks.{name}" for name in (
                "set", "condition", "response", "input", "loop", "parallel", "wait",
                "approval", "parser", "template", "llm", "agent", "router", "evaluator",
                "guardrail", "function", "http", "progress", "workflow")))


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    while len(data) < _HEADER.size or len(data) < _HEADER.size + _HEADER.unpack_from(data)[0]:
        piece = conn.recv(1 << 16)
        if not piece:
            raise ConnectionError("the shim closed before sending its command")
        data += piece
    return json.loads(data[_HEADER.size:]), fds


def _run_child(request: dict, fds: list[int]) -> int:
    """In the forked child: become the command, run the CLI, return its exit code."""
    import atexit

    os.setpgid(0, 0)                       # its own group: ended whole when its shim goes
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    for number in request["ignored"]:
        signal.signal(number, signal.SIG_IGN)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    sys.argv = list(request["argv"])
    code: object = 0
    try:
        from flowforge.cli.main import main

        main()
    except SystemExit as exc:
        code = exc.code
    except BaseException:                  # as the interpreter would print it
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        atexit._run_exitfuncs()
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    return code


def serve(path: str) -> None:
    """The server's loop: fork a child per connection, report how it ended."""
    import gc
    import threading

    import importlib

    import flowforge.cli.main  # noqa: F401  (what every command imports)

    for name in _PRELOAD:                  # what most commands import when they run
        importlib.import_module(name)

    assert threading.active_count() == 1, "forking is only safe with no other thread"
    gc.collect()
    gc.freeze()                            # the children do not copy what they only read
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    children: dict[int, socket.socket] = {}          # pid -> its shim's connection

    def stop(*_) -> None:                  # at the module's end: what is left goes too
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    print("ready", flush=True)
    while True:
        for key, _ in selector.select(timeout=0.02):
            if key.fileobj is listener:
                conn, _ = listener.accept()
                request, fds = _receive(conn)
                sys.stdout.flush()
                pid = os.fork()
                if pid == 0:
                    listener.close()
                    for other in children.values():
                        other.close()
                    conn.close()
                    os._exit(_run_child(request, fds))
                with contextlib.suppress(OSError):    # (the child may have done it first)
                    os.setpgid(pid, pid)
                for fd in fds:
                    os.close(fd)
                children[pid] = conn
                selector.register(conn, selectors.EVENT_READ, pid)
            else:
                pid, conn = key.data, key.fileobj
                message = conn.recv(64)
                for number in message.split():       # bash's `kill` on the shim
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, int(number))
                if not message:                      # the shim was killed: so is its group
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(pid, signal.SIGKILL)
                    selector.unregister(conn)
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = children.pop(pid)
            code = os.waitstatus_to_exitcode(status)
            with contextlib.suppress(OSError):
                conn.sendall(b"%d\n" % code)
            with contextlib.suppress(KeyError, ValueError):
                selector.unregister(conn)
            conn.close()


@contextlib.contextmanager
def forked_cli(folder: Path, env: dict[str, str]) -> Iterator[Path]:
    """Start a command server with `env` (the environment the commands share
    at import time); yield a folder to put first on PATH, holding its `flowforge`."""
    folder.mkdir(parents=True, exist_ok=True)
    path = str(folder / "cli.sock")
    bin_dir = folder / "bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "flowforge"
    shim.write_text(SHIM.format(python=sys.executable, path=path))
    shim.chmod(0o755)
    root = Path(__file__).resolve().parents[1]
    process = subprocess.Popen([sys.executable, "-m", "tests.forked_cli", path], cwd=root,
                               env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               start_new_session=True)
    try:
        assert process.stdout is not None
        ready = process.stdout.readline()
        assert ready == b"ready\n", f"the command server did not start ({ready!r})"
        yield bin_dir
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


if __name__ == "__main__":
    serve(sys.argv[1])
