"""Escape techniques tried against the sandbox, and how many held, per
category and confinement (issue 23's proof).

    .venv/bin/python bench/sandbox_escapes.py [--json]

Each technique is a Python block.  "source check" techniques go through the
whole sandbox (the check refuses them); every other category runs *past* the
source check (the tests' `check=False` hook) with `os`, `sys`, `ctypes` and
the real builtins in hand, so only the OS layer (namespaces, uid, capabilities,
mounts, rlimits, seccomp) stands in the way.  A technique held when the block
was stopped or reports it got nothing, *and* the host shows no trace of it
(sysctls unchanged, no planted file, the victim process alive, nobody connected
to the loopback listener).  Prints a Markdown table, or JSON lines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from flowforge.sandbox import Limits, SandboxError, run_python, sandbox_mode  # noqa: E402

PRELUDE = """
os = sys = None
for cls in ().__class__.__base__.__subclasses__():
    if cls.__name__ == "_wrap_close":
        os = cls.__init__.__globals__["sys"].modules["os"]
        sys = cls.__init__.__globals__["sys"]
real = sys.modules["builtins"]
OSError, MemoryError, open = real.OSError, real.MemoryError, real.open
ctypes = sys.modules["ctypes"]
libc = ctypes.CDLL(None, use_errno=True)
def ok(result):
    return result != -1
def opened(path, flags=0):
    try:
        os.close(os.open(path, flags, 0o644))
        return True
    except OSError:
        return False
def wrote(path, data):
    try:
        fd = os.open(path, os.O_WRONLY)
        os.write(fd, data)
        return True
    except OSError:
        return False
"""


@dataclass
class Technique:
    category: str
    name: str
    body: str               # returns {"escaped": bool} or raises; {host} is filled in
    checked: bool = False   # True: the source check is on (and should stop it)
    limits: Limits | None = None


def _block(technique: Technique, host: dict) -> str:
    body = technique.body.format(**host)
    if not technique.checked:
        body = PRELUDE + body
    lines = "\n".join("    " + line for line in body.strip().splitlines())
    return f"async def execute(inputs, context):\n{lines}\n"


D = "'_' * 2"
SOURCE_CHECK = [
    ("subclasses walk", "return {{'escaped': ().__class__.__base__.__subclasses__()}}"),
    ("getattr by string", "return {{'escaped': getattr((), '__cl' + 'ass__')}}"),
    ("__import__ os", "return {{'escaped': __import__('os').getcwd()}}"),
    ("import os", "import os\nreturn {{'escaped': os.getcwd()}}"),
    ("import ctypes", "import ctypes\nreturn {{'escaped': True}}"),
    ("open a file", "return {{'escaped': open('/etc/passwd').read()}}"),
    ("eval", "return {{'escaped': eval('1')}}"),
    ("generator frame", "def g():\n    yield 1\nreturn {{'escaped': str(g().gi_frame.f_globals)}}"),
    ("match keyword pattern on __globals__",
     "import json\nmatch json.dumps:\n    case object(__globals__=g):\n"
     "        return {{'escaped': str(g)}}\nreturn {{}}"),
    ("metaclass keyword", "class M(type):\n    pass\nclass C(metaclass=M):\n    pass\nreturn {{}}"),
    ("three-argument type() metaclass + __match_args__ bound to int (issue 23)",
     "import json\n"
     f"M = type('M', (type,), {{{{{D} + 'instancecheck' + {D}: lambda c, o: True}}}})\n"
     f"C = M('C', (), {{{{{D} + 'match_args' + {D}: ({D} + 'globals' + {D},)}}}})\n"
     "int = C\nmatch json.dumps:\n    case int(g):\n        return {{'escaped': str(g)}}\n"
     "return {{}}"),
    ("aliased type() builds a class",
     "t = type\nM = t('M', (t,), {{}})\nreturn {{'escaped': True}}"),
    ("metaclass from type(a class)", "M = type(int)('M', (), {{}})\nreturn {{'escaped': True}}"),
    ("functools.update_wrapper reads __globals__",
     "import functools, json\nbox = []\n"
     "functools.update_wrapper(box, json.dumps)\nreturn {{'escaped': True}}"),
]

PAST_THE_CHECK = [
    ("host files", "read /etc/shadow", "return {{'escaped': opened('/etc/shadow')}}"),
    ("host files", "read /etc/passwd", "return {{'escaped': opened('/etc/passwd')}}"),
    ("host files", "read a project file", "return {{'escaped': opened({project!r})}}"),
    ("host files", "read a host file readable by anyone",
     "return {{'escaped': opened({secret!r})}}"),
    ("host files", "plant a file in a folder anyone may write",
     "return {{'escaped': opened({planted!r}, os.O_WRONLY | os.O_CREAT)}}"),
    ("host files", "write into /usr",
     "return {{'escaped': opened('/usr/ff-planted', os.O_WRONLY | os.O_CREAT)}}"),
    ("host files", "list the host's root", "return {{'escaped': 'work' in os.listdir('/')}}"),
    ("sysctl and /proc", "write kernel.core_uses_pid",
     "return {{'escaped': wrote('/proc/sys/kernel/core_uses_pid', b'1')}}"),
    ("sysctl and /proc", "write kernel.core_pattern",
     "return {{'escaped': wrote('/proc/sys/kernel/core_pattern', b'|/tmp/x')}}"),
    ("sysctl and /proc", "write /proc/sysrq-trigger",
     "return {{'escaped': wrote('/proc/sysrq-trigger', b'h')}}"),
    ("sysctl and /proc", "read the host's processes in /proc",
     "return {{'escaped': opened('/proc/{host_pid}/environ')}}"),
    ("sysctl and /proc", "write vm.overcommit_memory",
     "return {{'escaped': wrote('/proc/sys/vm/overcommit_memory', b'1')}}"),
    ("devices and shared memory", "create a file in /dev/shm",
     "return {{'escaped': opened('/dev/shm/ff', os.O_WRONLY | os.O_CREAT)}}"),
    ("devices and shared memory", "memfd_create",
     "return {{'escaped': ok(libc.memfd_create(b'x', 0))}}"),
    ("devices and shared memory", "SysV shmget",
     "return {{'escaped': ok(libc.shmget(0, 1 << 20, 0o1600))}}"),
    ("devices and shared memory", "read /dev/mem", "return {{'escaped': opened('/dev/mem')}}"),
    ("devices and shared memory", "read the host's disk",
     "return {{'escaped': opened('/dev/vda') or opened('/dev/sda')}}"),
    ("network", "TCP socket", "return {{'escaped': ok(libc.socket(2, 1, 0))}}"),
    ("network", "Unix socket", "return {{'escaped': ok(libc.socket(1, 1, 0))}}"),
    ("network", "raw socket", "return {{'escaped': ok(libc.socket(2, 3, 1))}}"),
    ("network", "netlink socket", "return {{'escaped': ok(libc.socket(16, 3, 0))}}"),
    ("network", "socketpair",
     "pair = (ctypes.c_int * 2)()\nreturn {{'escaped': ok(libc.socketpair(1, 1, 0, pair))}}"),
    ("network", "connect to a loopback listener (network granted)",
     "fd = libc.socket(2, 1, 0)\n"
     "address = bytes([2, 0]) + ({port}).to_bytes(2, 'big') + bytes([127, 0, 0, 1]) + bytes(8)\n"
     "return {{'escaped': ok(fd) and ok(libc.connect(fd, address, 16))}}"),
    ("processes and signals", "fork", "return {{'escaped': ok(libc.fork())}}"),
    ("processes and signals", "exec /bin/sh",
     "return {{'escaped': ok(libc.execv(b'/bin/sh', None))}}"),
    ("processes and signals", "kill a host process",
     "return {{'escaped': ok(libc.kill({victim}, 9))}}"),
    ("processes and signals", "kill every process (-1)",
     "return {{'escaped': ok(libc.kill(-1, 9))}}"),
    ("processes and signals", "ptrace attach a host process",
     "return {{'escaped': ok(libc.ptrace(16, {victim}, 0, 0))}}"),
    ("processes and signals", "pidfd_open a host process",
     "return {{'escaped': ok(libc.syscall(434, {victim}, 0))}}"),
    ("processes and signals", "rt_sigqueueinfo to a host process",
     "info = ctypes.create_string_buffer(128)\n"
     "return {{'escaped': ok(libc.syscall(129, {victim}, 9, info))}}"),
    ("privileges", "setuid(0)", "libc.setuid(0)\nreturn {{'escaped': os.getuid() == 0}}"),
    ("privileges", "new user namespace (root inside)",
     "return {{'escaped': ok(libc.unshare(0x10000000))}}"),
    ("privileges", "mount a tmpfs",
     "return {{'escaped': ok(libc.mount(b'x', b'/tmp', b'tmpfs', 0, None))}}"),
    ("privileges", "chroot", "return {{'escaped': ok(libc.chroot(b'/tmp'))}}"),
    ("privileges", "raise the CPU rlimit",
     "limit = (ctypes.c_ulong * 2)(10 ** 6, 10 ** 6)\n"
     "return {{'escaped': ok(libc.setrlimit(0, limit))}}"),
    ("privileges", "capset: take capabilities",
     "class H(ctypes.Structure):\n    _fields_ = [('v', ctypes.c_uint32), ('p', ctypes.c_int)]\n"
     "full = (ctypes.c_uint32 * 6)(*([0xffffffff] * 6))\n"
     "return {{'escaped': ok(libc.capset(ctypes.byref(H(0x20080522, 0)), full))}}"),
    ("privileges", "bpf()", "return {{'escaped': ok(libc.syscall(321, 0, 0, 0))}}"),
    ("privileges", "io_uring_setup",
     "params = ctypes.create_string_buffer(120)\n"
     "return {{'escaped': ok(libc.syscall(425, 8, params))}}"),
    ("privileges", "add a key to the kernel keyring",
     "return {{'escaped': ok(libc.syscall(248, b'user', b'k', b'v', 1, -2))}}"),
    ("memory", "allocate past the limit",
     "try:\n    hoard = bytearray(200 * 1024 * 1024)\nexcept MemoryError:\n"
     "    return {{'escaped': False}}\nreturn {{'escaped': True}}"),
    ("memory", "mmap past the limit (MAP_NORESERVE)",
     "libc.mmap.restype = ctypes.c_void_p\n"
     "libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,"
     " ctypes.c_int, ctypes.c_long]\n"
     "addr = libc.mmap(None, 200 * 1024 * 1024, 3, 0x4022, -1, 0)\n"
     "return {{'escaped': addr not in (None, 2 ** 64 - 1)}}"),
    ("memory", "fill the scratch folder past its size",
     "chunk, written = b'x' * (1 << 20), 0\nfor i in range(64):\n    try:\n"
     "        fd = os.open(f'/tmp/fill{{i}}', os.O_WRONLY | os.O_CREAT, 0o600)\n"
     "        written += os.write(fd, chunk)\n        os.close(fd)\n    except OSError:\n"
     "        break\nreturn {{'escaped': written > 8 * (1 << 20)}}"),
    ("memory", "grow pipe buffers past the limit (F_SETPIPE_SZ)",
     "fds = (ctypes.c_int * 2)()\nlibc.pipe(fds)\n"
     "return {{'escaped': ok(libc.fcntl(fds[1], 1031, 1 << 20))}}"),
    ("memory", "hold kernel memory in many empty scratch files",
     "made = 0\nfor i in range(20000):\n    try:\n"
     "        os.close(os.open(f'/tmp/e{{i}}', os.O_WRONLY | os.O_CREAT, 0o600))\n"
     "    except OSError:\n        break\n    made += 1\n"
     "return {{'escaped': made > 8 * 64}}"),
    ("memory", "park files on the sandbox's root",
     "return {{'escaped': opened('/ff-planted', os.O_WRONLY | os.O_CREAT)}}"),
]

TECHNIQUES = [Technique("source check and restricted builtins", name, body, checked=True)
              for name, body in SOURCE_CHECK] \
    + [Technique(c, n, b, limits=Limits(memory_mb=128, file_mb=8, wall_seconds=10))
       for c, n, b in PAST_THE_CHECK]

CONTROL = Technique("control", "getpid succeeds", "return {{'escaped': ok(libc.getpid())}}")


def _host_state(host: dict) -> dict:
    sysctls = ["kernel/core_uses_pid", "kernel/core_pattern", "vm/overcommit_memory"]
    return {"sysctls": {n: Path("/proc/sys", n).read_text() for n in sysctls},
            "planted": Path(host["planted"]).exists() or Path("/usr/ff-planted").exists()}


async def attempt(technique: Technique, mode: str, host: dict, listener: socket.socket,
                  victim: subprocess.Popen) -> dict:
    before = _host_state(host)
    network = "network granted" in technique.name
    try:
        result = await run_python(_block(technique, host), {}, mode=mode, network=network,
                                  check=technique.checked, limits=technique.limits)
        escaped, how = bool(result.output.get("escaped")), "reported nothing gained"
    except SandboxError as exc:
        escaped, how = False, f"stopped ({exc.kind})"
    try:
        listener.accept()[0].close()
        escaped, how = True, "connected to the host's loopback"
    except BlockingIOError:
        pass
    if _host_state(host) != before:
        escaped, how = True, "changed the host"
    if victim.poll() is not None:
        escaped, how = True, "killed a host process"
    return {"mode": mode, "category": technique.category, "technique": technique.name,
            "held": not escaped, "how": how}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="one JSON line per attempt")
    args = parser.parse_args()
    modes = ["bwrap", "process"] if sandbox_mode() == "bwrap" else ["process"]
    folder = Path(tempfile.mkdtemp(prefix="ff-escapes-"))
    folder.chmod(0o777)
    secret = folder / "secret.txt"
    secret.write_text("host data")
    secret.chmod(0o644)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    host = {"project": str(Path(__file__).resolve()), "secret": str(secret),
            "planted": str(folder / "planted.txt"), "victim": victim.pid,
            "host_pid": os.getpid(), "port": listener.getsockname()[1]}
    rows, controls = [], []
    try:
        for mode in modes:
            # The harness must see a gain when there is one: a harmless call that
            # succeeds is reported as gained, and must not count as held.
            control = await attempt(CONTROL, mode, host, listener, victim)
            controls.append(not control["held"])
            for technique in TECHNIQUES:
                row = await attempt(technique, mode, host, listener, victim)
                rows.append(row)
                if args.json:
                    print(json.dumps(row), flush=True)
    finally:
        victim.kill()
        victim.wait()
        listener.close()
    if not args.json:
        print(table(rows, modes))
        print(f"Control (a harmless call reported as gained counts as not held): "
              f"{'seen' if all(controls) else 'NOT SEEN: the figures above mean nothing'}")


def table(rows: list[dict], modes: list[str]) -> str:
    categories = list(dict.fromkeys(r["category"] for r in rows))
    names = {"bwrap": "bubblewrap", "process": "plain process"}
    lines = ["| category | " + " | ".join(f"{names[m]}: held / tried" for m in modes) + " |",
             "| --- |" + " --- |" * len(modes)]
    for category in categories + ["all"]:
        cells = []
        for mode in modes:
            mine = [r for r in rows if r["mode"] == mode and category in (r["category"], "all")]
            cells.append(f"{sum(r['held'] for r in mine)} / {len(mine)}")
        label = "**all**" if category == "all" else category + \
            ("" if category.startswith("source check") else " (past the source check)")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    failures = [r for r in rows if not r["held"]]
    lines += ["", "Not held: " + (", ".join(f"{r['mode']}: {r['technique']} ({r['how']})"
                                            for r in failures) or "none")]
    return "\n".join(lines)


if __name__ == "__main__":
    asyncio.run(main())
