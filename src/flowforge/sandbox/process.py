"""Run untrusted Python block source in a separate, confined process.

Two confinements, chosen once per process (`FLOWFORGE_SANDBOX=bwrap|process`
forces one):

- `bwrap` (bwrap.py): bubblewrap, the block as uid 65534 in its own user,
  PID, network, IPC and UTS namespaces, no capabilities, read-only root,
  /usr, /proc and /dev, a scratch tmpfs counted in its memory limit; plus
  the runner's rlimits and seccomp.
- `process`: a plain subprocess with the runner's rlimits, dropped to
  `nobody` (empty bounding set) when started as root, in its own user and
  network namespaces where the kernel allows, and a seccomp filter that also
  denies opening files (so there is no scratch directory in this mode).

Either way the parent counts wall time, kills the whole process group past
it, caps what it reads, and answers the block's HTTP requests through the
SSRF guard.  Every failure is a `SandboxError` whose `kind` says which limit
or rule stopped the block.

Starting the confined interpreter is most of a block's cost (~50 ms), so
after the first run each mode keeps one process started and waiting for its
job (`FLOWFORGE_SANDBOX_WARM`, default 1; 0 turns it off).  A waiting process
has read nothing and confined nothing yet: it takes its limits, rules and
code from the job like a cold one, runs one block and exits; the pool only
moves the start earlier.  Idle processes are killed when this process exits,
and a forked child (a worker pool) never uses its parent's.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

from flowforge.errors import RunError
from flowforge.sandbox.bwrap import bwrap_works, start_bwrap
from flowforge.sandbox.bwrap import interpreter as _interpreter
from flowforge.sandbox.limits import Limits
from flowforge.sandbox.memory import MemoryBudgetError, installed_budget
from flowforge.sandbox.source_check import check_source

__all__ = ["SandboxError", "SandboxResult", "run_python", "sandbox_mode", "HttpHandler"]

RUNNER = Path(__file__).with_name("runner.py")
CONFINE = Path(__file__).with_name("confine.py")            # loaded by the runner
SOURCE_CHECK = Path(__file__).with_name("source_check.py")  # likewise
HttpHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class SandboxError(RunError):
    """A sandboxed block was stopped. `kind`: rejected (the source check),
    error (the block raised), cpu, wall, memory, output, killed, setup."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        self.message = message
        super().__init__(message)


@dataclass
class SandboxResult:
    output: dict[str, Any]
    logs: str = ""
    duration_ms: float = 0.0
    mode: str = ""
    http_calls: list[str] = field(default_factory=list)


def sandbox_mode() -> str:
    """`bwrap` when bubblewrap runs here, else `process`."""
    forced = os.environ.get("FLOWFORGE_SANDBOX", "").strip().lower()
    if forced in ("bwrap", "process"):
        return forced
    return "bwrap" if bwrap_works() else "process"


_CHILD_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


class _Child:
    """One sandbox process (started, not yet given its job) and its scratch
    folder: inside bubblewrap the runner mounts it (sized by the job), in the
    plain-process confinement it is an empty directory the block may not open."""

    def __init__(self, mode: str) -> None:
        self.scratch = tempfile.mkdtemp(prefix="flowforge-sandbox-") if mode == "process" \
            else None
        pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE,
                 "start_new_session": True, "env": _CHILD_ENV}
        python, _ = _interpreter()
        try:
            if mode == "bwrap":
                # Modules are imported when the block asks (importing all of them up
                # front costs more CPU than most blocks; back to back, that is latency).
                self.proc = start_bwrap(["{python}", "-I", "-S", "-B", "/sandbox/runner.py"],
                                        {str(RUNNER): "/sandbox/runner.py",
                                         str(CONFINE): "/sandbox/confine.py",
                                         str(SOURCE_CHECK): "/sandbox/source_check.py"},
                                        cwd="/", **pipes)
            else:
                # No file may be opened once confined: the runner imports what blocks
                # may use first.
                self.proc = subprocess.Popen([python, "-I", "-S", "-B", str(RUNNER), "--preload"],
                                             cwd=self.scratch, **pipes)
        except OSError as exc:
            _cleanup(self.scratch)
            raise SandboxError("setup", f"cannot start the sandbox ({mode}): {exc}; install "
                               f"bubblewrap (apt-get install bubblewrap) or set "
                               f"FLOWFORGE_SANDBOX=process") from None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def discard(self) -> None:
        """Kill (if still running), reap, remove the scratch folder; never raises."""
        _kill(self.proc)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                stream.close()                     # type: ignore[union-attr]
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        _cleanup(self.scratch)


class _WarmPool:
    """Started sandbox processes waiting for a job, by mode."""

    def __init__(self) -> None:
        self.idle: dict[str, list[_Child]] = {}
        self.pid = os.getpid()

    @staticmethod
    def size() -> int:
        value = os.environ.get("FLOWFORGE_SANDBOX_WARM", "1").strip()
        return max(0, min(int(value), 8)) if value.isdigit() else 1

    def take(self, mode: str) -> _Child:
        """A waiting process for `mode` if one is alive, else a newly started one."""
        if self.pid == os.getpid():
            idle = self.idle.get(mode, [])
            while idle:
                child = idle.pop()
                if child.alive():
                    return child
                child.discard()
        return _Child(mode)

    def refill(self, mode: str) -> None:
        """Start processes until `mode` has its share waiting (after a take)."""
        if self.pid != os.getpid():
            return
        idle = self.idle.setdefault(mode, [])
        try:
            while len(idle) < self.size():
                idle.append(_Child(mode))
        except SandboxError:
            pass                      # the next run starts cold and reports the problem

    def close(self) -> None:
        if self.pid != os.getpid():
            return                    # a forked child: the processes are the parent's
        for idle in self.idle.values():
            while idle:
                idle.pop().discard()


_POOL = _WarmPool()
atexit.register(_POOL.close)


def _forget_inherited_pool() -> None:
    global _POOL
    _POOL = _WarmPool()


os.register_at_fork(after_in_child=_forget_inherited_pool)


async def run_python(source: str, inputs: dict[str, Any], *, limits: Limits | None = None,
                     network: bool = False, http: HttpHandler | None = None,
                     context: dict[str, Any] | None = None, mode: str | None = None,
                     check: bool = True, isolated_only: bool = False) -> SandboxResult:
    """Run `async def execute(inputs, context)` from `source` in a confined
    process and return its dict. Raises SandboxError when a rule or limit
    stops it, naming the line when the block's own code failed.

    `check=False` skips the source check: a trusted hook for the escape
    tests and bench/sandbox_escapes.py only, to prove the OS layer holds on
    its own; no block definition, document or server route passes it.
    `isolated_only` (a server running other people's blocks) refuses the
    plain-subprocess confinement: without bubblewrap a block shares the
    server's filesystem view and is held by seccomp and rlimits alone.

    With a memory budget installed (a server: `memory.install_budget`), the
    block's `memory_mb` is charged to its user (`context["user_id"]`) and to
    the process before its process starts, and given back when it ends; a
    block that gets no memory within the budget's wait fails (kind `budget`)."""
    limits = (limits or Limits()).capped()
    problems = check_source(source) if check else []
    if problems:
        raise SandboxError("rejected", "the block's source was rejected: " + "; ".join(problems))
    mode = mode or sandbox_mode()
    if mode == "process" and isolated_only:
        raise SandboxError("isolation", "this server runs untrusted Python blocks only inside "
                           "bubblewrap, which is not available here (install the `bubblewrap` "
                           "package); an administrator who accepts the weaker plain-process "
                           "confinement starts the server with `flowforge serve "
                           "--allow-process-sandbox` (FLOWFORGE_ALLOW_PROCESS_SANDBOX=1)")
    if network and http is None:
        from flowforge.sandbox.http_bridge import guarded_request
        http = guarded_request
    scratch = mode == "bwrap"                       # a folder only where files may be opened
    job = {"source": source, "inputs": inputs, "context": context or {},
           "limits": {**limits.to_dict(), "address_space_mb": limits.address_space_mb(scratch),
                      "scratch_bytes": limits.scratch_bytes if scratch else 0,
                      "scratch_files": limits.scratch_files if scratch else 0},
           "network": network,
           "deny_files": mode == "process", "drop_root": mode == "process", "check": check}
    async with AsyncExitStack() as held:
        budget = installed_budget()
        if budget is not None:
            owner = str((context or {}).get("user_id") or "default")
            try:
                await held.enter_async_context(budget.hold(owner, int(limits.memory_mb)))
            except MemoryBudgetError as exc:
                raise SandboxError("budget", str(exc)) from None
        return await _run_job(job, mode, limits, http)


async def _run_job(job: dict[str, Any], mode: str, limits: Limits,
                   http: HttpHandler | None) -> SandboxResult:
    """One job in one confined process (taken from the warm pool), to its answer."""
    started = time.monotonic()
    child = _POOL.take(mode)
    calls: list[str] = []
    channel = _Channel()
    try:
        await channel.open(child.proc, limits.output_bytes + 65536)
        channel.send(job)
        # The next block's process starts while this one runs (on the loop's
        # next turn: not between sending this job and reading its answer).
        asyncio.get_running_loop().call_soon(_POOL.refill, mode)
        message = await asyncio.wait_for(
            _converse(child.proc, channel, http, calls, limits), timeout=limits.wall_seconds)
    except asyncio.TimeoutError:
        raise SandboxError("wall", f"the block ran longer than its wall-time limit of "
                           f"{limits.wall_seconds:g} s and was stopped") from None
    finally:
        channel.close()
        child.discard()               # killed if still there: one process, one block
    duration = round((time.monotonic() - started) * 1000, 3)
    if message.get("ok"):
        return SandboxResult(message.get("output") or {}, message.get("logs") or "", duration,
                             mode, calls)
    raise SandboxError(message.get("kind", "error"), message.get("message", "the block failed"))


class _Channel:
    """The child's stdin and stdout as asyncio streams of the running loop (a
    waiting process may have been started under another loop, or none)."""

    def __init__(self) -> None:
        self.reader: asyncio.StreamReader | None = None
        self.transports: list[asyncio.BaseTransport] = []

    async def open(self, proc: subprocess.Popen, limit: int) -> None:
        loop = asyncio.get_running_loop()
        self.reader = reader = asyncio.StreamReader(limit=limit, loop=loop)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop), proc.stdout)
        self.transports.append(read_transport)
        write_transport, _ = await loop.connect_write_pipe(asyncio.Protocol, proc.stdin)
        self.transports.append(write_transport)

    def send(self, message: dict) -> None:
        self.transports[1].write((json.dumps(message, default=str) + "\n").encode())  # type: ignore[attr-defined]

    def close(self) -> None:
        for transport in self.transports:
            transport.close()


async def _converse(proc: subprocess.Popen, channel: _Channel, http: HttpHandler | None,
                    calls: list[str], limits: Limits) -> dict[str, Any]:
    assert channel.reader is not None
    while True:
        try:
            line = await channel.reader.readline()
        except (ValueError, asyncio.LimitOverrunError):
            raise SandboxError("output", f"the block's output exceeds the limit of "
                               f"{limits.output_bytes} bytes") from None
        if not line:
            return await _explain_exit(proc, limits)
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            raise SandboxError("error", "the block wrote something that is not the sandbox "
                               "protocol to its output") from None
        if message.get("op") == "http":
            calls.append(f"{message.get('method')} {message.get('url')}")
            answer = await http(message) if http else {"error": "network is not declared"}
            channel.send(answer)
            continue
        return message


async def _explain_exit(proc: subprocess.Popen, limits: Limits) -> dict[str, Any]:
    code = await asyncio.to_thread(proc.wait)
    stderr = (await asyncio.to_thread(proc.stderr.read, 4000)).decode(
        errors="replace").strip() if proc.stderr else ""
    if code in (-signal.SIGXCPU, 128 + signal.SIGXCPU, -signal.SIGKILL, 128 + signal.SIGKILL) \
            and "MemoryError" not in stderr:
        return {"ok": False, "kind": "cpu", "message": f"the block used more than its CPU-time "
                f"limit of {limits.cpu_seconds} s and was stopped"}
    if "MemoryError" in stderr:
        return {"ok": False, "kind": "memory", "message": f"the block exceeded its memory "
                f"limit of {limits.memory_mb} MB"}
    tail = stderr.splitlines()[-1] if stderr else f"exit status {code}"
    return {"ok": False, "kind": "killed", "message": f"the sandboxed process ended without a "
            f"result ({tail})"}


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return                        # reaped: its pid may belong to someone else now
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _cleanup(scratch: str | None) -> None:
    if scratch:
        shutil.rmtree(scratch, ignore_errors=True)
