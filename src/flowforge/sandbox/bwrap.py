"""The bubblewrap confinement: how a block's process is started inside it.

What the block gets, and why each part is there (the source check in front
of it is only a lint; this is the boundary):

- an unprivileged uid/gid (65534) in its own user namespace, mapped to an
  unprivileged host uid: when flowforge runs as root, bubblewrap itself is
  started as 65534, so even a kernel check on the host uid (sysctl writes
  test the *host* uid) sees nobody, never root;
- no capabilities (bounding set empty), no_new_privs, no further user
  namespaces;
- its own PID, network, IPC and UTS namespaces: no host process to signal,
  no network at all (declared HTTP is answered by the parent), even loopback;
- `/proc` of its own PID namespace, mounted read-only (so `/proc/sys`
  cannot be written), `/dev` read-only with only null/zero/random/urandom/tty
  (no `/dev/shm`), `/usr` and the interpreter read-only;
- a read-only root, and a scratch `/tmp` that the runner mounts once it has
  its job (confine.py): a tmpfs of `Limits.scratch_bytes` holding at most
  `Limits.scratch_files` files, taken out of the block's address space (see
  limits.py), so files cannot hold memory beyond the block's limit.  For that
  mount alone bubblewrap leaves the runner CAP_SYS_ADMIN and CAP_SETPCAP
  *inside its user namespace* (they reach no host resource); the runner drops
  every capability, bounding set included, before it compiles the block.

The runner's files are read by the parent and copied in (`--ro-bind-data`),
so the unprivileged user need not reach them; when flowforge runs as root, an
interpreter nobody may reach (pyenv under `/root`) is replaced by the
system's `/usr/bin/python3` (the runner needs the standard library only).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["NOBODY", "bwrap_works", "interpreter", "start_bwrap"]

NOBODY = 65534
"""The uid and gid a block runs as, inside and (when we are root) outside."""


def interpreter() -> tuple[str, str]:
    """The bare interpreter (not the venv's site-packages) and its prefix."""
    prefix = sys.base_prefix
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (Path(prefix) / "bin" / version, Path(prefix) / "bin" / "python3"):
        if candidate.exists():
            return str(candidate), prefix
    return sys.executable, prefix


def _reachable_by_nobody(path: str) -> bool:
    """Every folder above `path` may be searched, and `path` read and run, by others."""
    current = Path(path).resolve()
    for folder in current.parents:
        if not os.stat(folder).st_mode & 0o001:
            return False
    return os.stat(current).st_mode & 0o005 == 0o005


def _sandbox_interpreter() -> tuple[str, str]:
    """The interpreter bubblewrap starts, as the user that starts it: ours, or
    when we are root and ours lives where nobody may look (pyenv under
    /root), the system's /usr/bin/python3 (the runner needs the stdlib only)."""
    python, prefix = interpreter()
    if os.geteuid() != 0 or _reachable_by_nobody(python):
        return python, prefix
    return "/usr/bin/python3", "/usr"


def _as_nobody() -> dict[str, Any]:
    """Popen arguments that start bubblewrap as an unprivileged host user."""
    if os.geteuid() != 0:
        return {}                      # already unprivileged: the user namespace maps to us
    return {"user": NOBODY, "group": NOBODY, "extra_groups": []}


def start_bwrap(tail: list[str], files: dict[str, str] | None = None,
                **popen: Any) -> subprocess.Popen:
    """Start `tail` (a command inside the sandbox; "{python}" stands for the
    interpreter) confined; `files` maps host files to where a read-only copy
    appears inside (read by us, so nobody need not reach them)."""
    python, prefix = _sandbox_interpreter()
    binds = {} if prefix.startswith("/usr/") else {prefix: prefix}
    if not str(Path(python).resolve()).startswith(("/usr/", prefix)):
        binds[python] = python
    fds: list[int] = []
    try:
        args = ["bwrap", "--unshare-all", "--unshare-user", "--disable-userns",
                "--uid", str(NOBODY), "--gid", str(NOBODY),
                "--die-with-parent", "--new-session", "--cap-drop", "ALL",
                "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP",   # see above
                "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib",
                "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
                "--proc", "/proc", "--remount-ro", "/proc",
                "--dev", "/dev", "--remount-ro", "/dev",
                "--dir", "/tmp", "--chdir", "/", "--clearenv", "--setenv", "PATH", "/usr/bin",
                "--setenv", "HOME", "/tmp"]
        for source, target in binds.items():
            args += ["--ro-bind", source, target]
        for source, target in (files or {}).items():
            fd = os.open(source, os.O_RDONLY | os.O_CLOEXEC)
            fds.append(fd)
            args += ["--ro-bind-data", str(fd), target]
        args += ["--remount-ro", "/"]        # the root is a tmpfs too: no unsized files there
        command = [python if part == "{python}" else part for part in tail]
        return subprocess.Popen([*args, *command], pass_fds=fds, **_as_nobody(), **popen)
    finally:
        for fd in fds:
            os.close(fd)


@functools.lru_cache(maxsize=1)
def bwrap_works() -> bool:
    """bubblewrap is installed and may build the whole confinement here (user
    namespaces allowed for an unprivileged user, a read-only /proc)."""
    if shutil.which("bwrap") is None:
        return False
    try:
        proc = start_bwrap(["{python}", "-I", "-S", "-c", ""], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    except OSError:
        return False
    try:
        return proc.wait(timeout=10) == 0
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return False
