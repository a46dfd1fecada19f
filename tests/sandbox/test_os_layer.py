"""The OS layer holds on its own (issue 23): code that is already past the
source check (the tests' `check=False` hook, which no document, registry
block or server route can set) holds `os`, `sys` and `ctypes`, and still
cannot read or write a host file, write a sysctl, use /dev/shm, open a
socket (even to loopback, even with network granted), signal another
process, or hold memory beyond its limit, in files or otherwise.  It runs
as uid 65534 with no capabilities, in namespaces of its own, in both
confinements."""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from flowforge.sandbox import Limits, run_python
from flowforge.sandbox.process import _POOL
from tests.sandbox.test_escapes import OS_VIA_SUBCLASSES, mode  # noqa: F401

pytestmark = pytest.mark.asyncio

LIBC = """
OSError, MemoryError = sys.modules["builtins"].OSError, sys.modules["builtins"].MemoryError
ctypes = sys.modules["ctypes"]
libc = ctypes.CDLL(None, use_errno=True)
def attempt(call, *args):
    result = call(*args)
    return [result, ctypes.get_errno()] if result == -1 else [result, 0]
def oserror(action):
    try:
        action()
    except OSError as exc:
        return exc.errno
    return 0
"""


def past_the_check(body: str) -> str:
    """A block that reached `os`, `sys` and `ctypes` around the source check."""
    lines = (LIBC + "\n" + body).strip().splitlines()
    return OS_VIA_SUBCLASSES.rstrip() + "\n" + "\n".join("    " + line for line in lines) + "\n"


async def unchecked(mode: str, body: str, limits: Limits | None = None, **kw) -> dict:
    result = await run_python(past_the_check(body), {}, mode=mode, check=False,
                              limits=limits or Limits(wall_seconds=10), **kw)
    return result.output


CREDENTIALS = """
class Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
caps = (ctypes.c_uint32 * 6)()
libc.capget(ctypes.byref(Header(0x20080522, 0)), caps)
return {"uid": list(os.getresuid()), "gid": list(os.getresgid()), "groups": os.getgroups(),
        "caps": list(caps), "bounding": sum(libc.prctl(23, c, 0, 0, 0) == 1 for c in range(64)),
        "ambient": sum(libc.prctl(47, 1, c, 0, 0) == 1 for c in range(64)),
        "no_new_privs": libc.prctl(39, 0, 0, 0, 0)}
"""


async def test_the_block_runs_as_nobody_with_no_capability_and_no_new_privileges(mode):
    found = await unchecked(mode, CREDENTIALS)
    assert found == {"uid": [65534] * 3, "gid": [65534] * 3, "groups": [], "caps": [0] * 6,
                     "bounding": 0, "ambient": 0, "no_new_privs": 1}


def _descendants() -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _user_namespaces_for_nobody() -> bool:
    as_nobody = {"user": 65534, "group": 65534, "extra_groups": []} if os.geteuid() == 0 else {}
    return subprocess.run(["unshare", "--user", "true"], capture_output=True,
                          **as_nobody).returncode == 0


async def test_on_the_host_the_block_is_an_unprivileged_uid_in_its_own_user_namespace(
        mode, monkeypatch):
    """Seen from outside: every process of the sandbox has host uid 65534 (a
    kernel check on the host uid, as sysctl writes do, sees nobody), and the
    block's own process lives in another user namespace than ours."""
    monkeypatch.setenv("FLOWFORGE_SANDBOX_WARM", "0")       # no waiting process, not yet confined
    _POOL.close()
    # Processes earlier tests of the session left running (servers, workers) are
    # this process's children too, and not the sandbox's.
    before = set(_descendants())
    run = asyncio.create_task(unchecked(mode, "libc.sleep(3)\nreturn {}"))
    ours = os.readlink("/proc/self/ns/user")
    # The last look at each process counts: the plain process becomes nobody
    # before it enters its namespace, so a look between the two sees nobody in
    # ours.  The block sleeps 3 s after both; looks go on until it returns.
    seen: dict[int, tuple[list[str], str]] = {}
    while not run.done():
        await asyncio.sleep(0.05)
        for pid in set(_descendants()) - before:
            try:
                status = Path(f"/proc/{pid}/status").read_text()
                userns = os.readlink(f"/proc/{pid}/ns/user")
            except OSError:
                continue
            uids = next(line for line in status.splitlines() if line.startswith("Uid:"))
            argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
            if Path(argv0.decode(errors="replace")).name.startswith("python"):   # not bwrap
                seen[pid] = (uids.split()[1:], userns)
    await run
    assert seen, "no sandboxed process was seen"
    for uids, userns in seen.values():
        assert uids == ["65534"] * 4
        # the plain process enters one where the kernel lets an unprivileged user
        assert (userns != ours) == (mode == "bwrap" or _user_namespaces_for_nobody())


async def test_host_files_can_be_neither_read_nor_written(mode, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("host data")
    secret.chmod(0o644)
    tmp_path.chmod(0o777)                    # even a folder anyone may write to
    target = tmp_path / "planted.txt"
    found = await unchecked(mode, f"""
return {{"shadow": oserror(lambda: os.open("/etc/shadow", os.O_RDONLY)),
        "passwd": oserror(lambda: os.open("/etc/passwd", os.O_RDONLY)),
        "secret": oserror(lambda: os.open({str(secret)!r}, os.O_RDONLY)),
        "plant": oserror(lambda: os.open({str(target)!r}, os.O_WRONLY | os.O_CREAT, 0o644)),
        "usr": oserror(lambda: os.open("/usr/flowforge-planted", os.O_WRONLY | os.O_CREAT)),
        "root": oserror(lambda: os.open("/flowforge-planted", os.O_WRONLY | os.O_CREAT))}}
""")
    denied = {errno.ENOENT, errno.EACCES, errno.EPERM, errno.EROFS}
    assert all(code in denied for code in found.values()), found
    assert not target.exists()
    assert not Path("/usr/flowforge-planted").exists()


async def test_sysctls_cannot_be_written_and_the_hosts_stay_unchanged(mode):
    watched = ["kernel/core_uses_pid", "kernel/core_pattern", "vm/overcommit_memory"]
    before = {name: Path("/proc/sys", name).read_text() for name in watched}
    found = await unchecked(mode, f"""
def write(name, data):
    fd = os.open("/proc/sys/" + name, os.O_WRONLY)
    os.write(fd, data)
    os.close(fd)
current = {{}}
for name in {watched!r}:
    current[name] = oserror(lambda: write(name, b"1\\n"))
current["sysrq"] = oserror(lambda: write("../sysrq-trigger", b"h"))
return current
""")
    assert all(code in {errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOENT}
               for code in found.values()), found
    assert {name: Path("/proc/sys", name).read_text() for name in watched} == before


async def test_there_is_no_shared_memory_to_write(mode):
    found = await unchecked(mode, """
return {"dev_shm": oserror(lambda: os.open("/dev/shm/x", os.O_WRONLY | os.O_CREAT, 0o600)),
        "dev": oserror(lambda: os.open("/dev/planted", os.O_WRONLY | os.O_CREAT, 0o600)),
        "memfd": attempt(libc.memfd_create, b"x", 0),
        "shmget": attempt(libc.shmget, 0, 1 << 20, 0o1600)}
""")
    assert found["dev_shm"] in {errno.ENOENT, errno.EROFS, errno.EACCES, errno.EPERM}
    assert found["dev"] in {errno.EROFS, errno.EACCES, errno.EPERM}
    assert found["memfd"] == [-1, errno.EPERM] and found["shmget"] == [-1, errno.EPERM]


@pytest.mark.parametrize("network", [False, True], ids=["not-granted", "granted"])
async def test_no_socket_reaches_even_loopback(mode, network):
    """Declared network is served by the parent (through the SSRF guard); the
    block's own process never has a socket."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        found = await unchecked(mode, f"""
inet = attempt(libc.socket, 2, 1, 0)
unix = attempt(libc.socket, 1, 1, 0)
pair = (ctypes.c_int * 2)()
return {{"inet": inet, "unix": unix, "pair": attempt(libc.socketpair, 1, 1, 0, pair),
        "port": {port}}}
""", network=network)
        assert found["inet"] == found["unix"] == found["pair"] == [-1, errno.EPERM]
        with pytest.raises(BlockingIOError):
            listener.accept()                 # nobody connected
    finally:
        listener.close()


async def test_no_signal_reaches_another_process(mode):
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        found = await unchecked(mode, f"""
return {{"victim": attempt(libc.kill, {victim.pid}, 9),
        "everyone": attempt(libc.kill, -1, 9),
        "parent": attempt(libc.kill, os.getppid(), 9),
        "group": attempt(libc.kill, 0, 9)}}
""")
        assert victim.poll() is None, "the sandboxed block killed another process"
        assert all(code == [-1, errno.EPERM] for code in found.values()), found
    finally:
        victim.kill()
        victim.wait()


async def test_memory_beyond_the_limit_cannot_be_had(mode):
    found = await unchecked(mode, """
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
big = 200 * 1024 * 1024
mapped = libc.mmap(None, big, 3, 0x22 | 0x4000, -1, 0)   # MAP_PRIVATE|ANON|NORESERVE
raise_limit = attempt(libc.setrlimit, 9, (ctypes.c_ulong * 2)(1 << 40, 1 << 40))
try:
    hoard = bytearray(big)
    allocated = True
except MemoryError:
    allocated = False
pipe = (ctypes.c_int * 2)()
libc.pipe(pipe)
return {"mmap_failed": mapped in (None, 2 ** 64 - 1), "allocated": allocated,
        "raise_limit": raise_limit, "pipe_buffer": attempt(libc.fcntl, pipe[1], 1031, 1 << 20)}
""", Limits(memory_mb=128, wall_seconds=10))
    # F_SETPIPE_SZ: 1 MB of kernel memory per pipe, outside the address space
    assert found == {"mmap_failed": True, "allocated": False, "raise_limit": [-1, errno.EPERM],
                     "pipe_buffer": [-1, errno.EPERM]}


async def test_scratch_files_cannot_hold_memory_beyond_the_limit(mode):
    """In bubblewrap /tmp is a tmpfs: its size, ~1 KB of kernel memory for each
    file it may hold, and the address space the block may map stay within
    memory_mb; writing past its size or its file count fails (ENOSPC).  The
    plain process has no scratch folder at all."""
    limits = Limits(memory_mb=128, file_mb=8, wall_seconds=10)
    found = await unchecked(mode, """
resource = sys.modules["resource"]
def fill(count, chunk):
    made, written = 0, 0
    for index in range(count):
        try:
            fd = os.open(f"/tmp/{len(chunk)}-{index}", os.O_WRONLY | os.O_CREAT, 0o600)
        except OSError as exc:
            return made, written, exc.errno
        made += 1
        try:
            written += os.write(fd, chunk)
        except OSError as exc:
            return made, written, exc.errno
        finally:
            os.close(fd)
    return made, written, 0
_, written, size_error = fill(64, b"x" * (1024 * 1024))
made, _, count_error = fill(100_000, b"")
try:
    disk = os.statvfs("/tmp")
    scratch, files = disk.f_blocks * disk.f_frsize, disk.f_files
except OSError:
    scratch = files = 0
return {"written": written, "size_error": size_error, "made": made,
        "count_error": count_error, "scratch": scratch, "files": files,
        "address_space": resource.getrlimit(resource.RLIMIT_AS)[0]}
""", limits)
    mb = 1024 * 1024
    expected = errno.ENOSPC if mode == "bwrap" else errno.EPERM
    assert found["size_error"] == found["count_error"] == expected, found
    assert found["written"] <= limits.scratch_bytes and found["made"] <= limits.scratch_files
    assert found["scratch"] + found["files"] * 1024 + found["address_space"] \
        <= limits.memory_mb * mb
    if mode == "bwrap":
        assert (found["scratch"], found["files"]) == (limits.scratch_bytes, limits.scratch_files)
        assert limits.scratch_bytes + limits.scratch_files * 1024 == 8 * mb
        assert found["written"] >= 6 * mb          # the folder is there to be used
        assert found["made"] >= limits.scratch_files - 16


async def test_no_block_definition_can_switch_the_source_check_off():
    """The hook that skips the check is a keyword of run_python that only these
    tests pass: a registry block (what documents and the server run) asking for
    it in its metadata is still checked, and refused."""
    from types import SimpleNamespace

    from flowforge.blocks.registry_block import execute_definition
    from flowforge.registry.model import BlockDefinition

    definition = BlockDefinition(
        id="sneaky", name="Sneaky", description="asks to skip the check",
        execution_type="python", source_code=past_the_check("return {'uid': os.getuid()}"),
        metadata={"check": False, "source_check": False, "trusted": True})
    context = SimpleNamespace(services={}, emit=lambda *args, **kwargs: None)
    with pytest.raises(Exception) as info:
        await execute_definition(definition, {}, context)
    assert "the block's source was rejected" in str(info.value)
    assert "'__class__' is not allowed" in str(info.value)
