"""What the sandbox's child does to itself before it runs a block: rlimits,
leaving root and its capabilities (and, without bubblewrap, entering
namespaces of its own), and the seccomp allow-list.

Loaded by runner.py from the file next to it, in a bare interpreter: the
standard library only, nothing from flowforge.  Everything here runs after
the job is read and before the block's code is compiled; the block never
sees this module.
"""

from __future__ import annotations

__all__ = ["drop_capabilities", "drop_root", "install_seccomp", "load_seccomp",
           "mount_scratch", "set_limits"]


def set_limits(limits: dict) -> None:
    import resource
    cpu = int(limits["cpu_seconds"])
    # Less than memory_mb where a scratch tmpfs takes the rest (see limits.py).
    memory = int(limits.get("address_space_mb") or limits["memory_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(limits["file_mb"]) * 1024 * 1024,) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))


#: What a confined block may ask of the kernel: memory, time, its inherited pipes,
#: signals to itself, and nothing else.  Everything not listed fails with EPERM
#: (io_uring, sockets, exec, fork/clone, ptrace, kill and queued signals to
#: other processes, pidfd_*, bpf, keyrings, rlimit changes, mounts, ...).
_ALLOWED_ALWAYS = (
    "read", "write", "readv", "writev", "pread64", "pwrite64", "close", "fstat", "lseek",
    "mmap", "munmap", "mremap", "mprotect", "brk", "madvise", "mincore",
    "futex", "futex_waitv", "set_robust_list", "get_robust_list", "rseq",
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack",
    "clock_gettime", "clock_getres", "clock_nanosleep", "gettimeofday", "time", "nanosleep",
    "getrandom", "getpid", "gettid", "getppid", "getuid", "geteuid", "getgid", "getegid",
    "getgroups", "getresuid", "getresgid", "getpgrp", "getpgid", "getsid",
    "sched_yield", "sched_getaffinity", "getcpu", "uname", "sysinfo", "getrusage", "times",
    "getrlimit", "exit", "exit_group", "ioctl", "dup", "dup2", "dup3",
    "poll", "ppoll", "select", "pselect6", "epoll_create1", "epoll_ctl", "epoll_wait",
    "epoll_pwait", "pipe", "pipe2", "eventfd2", "restart_syscall", "prctl", "arch_prctl",
    "membarrier", "newfstatat", "statx", "fstatfs", "getcwd", "capget",
)
#: With a filesystem of its own (bubblewrap: a scratch tmpfs and read-only /usr).
_ALLOWED_FILES = (
    "open", "openat", "openat2", "stat", "lstat", "access", "faccessat", "faccessat2",
    "readlink", "readlinkat", "getdents64", "statfs", "creat", "unlink", "unlinkat",
    "rename", "renameat", "renameat2", "mkdir", "mkdirat", "rmdir", "ftruncate", "truncate",
    "fsync", "fdatasync", "chdir", "fchdir", "utimensat", "fadvise64",
)
#: The only signal calls allowed are aimed at the caller itself (argument 0 checked).
_SELF_SIGNALS = ("kill", "tgkill")


def load_seccomp():
    """libseccomp through ctypes (Debian `libseccomp2`), loaded while files
    can still be opened."""
    import ctypes
    return ctypes, ctypes.CDLL("libseccomp.so.2", use_errno=True)


def install_seccomp(loaded, deny_files: bool) -> None:
    """Allow the syscalls a block needs and nothing else (EPERM for the rest,
    so Python raises a clear PermissionError)."""
    import os
    ctypes, lib = loaded

    class ArgCmp(ctypes.Structure):
        _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int),
                    ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]

    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                     ctypes.c_uint]
    lib.seccomp_rule_add_exact.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                           ctypes.c_uint, ArgCmp]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    allow, deny = 0x7FFF0000, 0x00050000 | 1            # SCMP_ACT_ALLOW, SCMP_ACT_ERRNO(EPERM)
    ctx = lib.seccomp_init(deny)
    if not ctx:
        raise OSError("seccomp_init failed")
    for name in _ALLOWED_ALWAYS + (() if deny_files else _ALLOWED_FILES):
        number = lib.seccomp_syscall_resolve_name(name.encode())
        if number >= 0 and lib.seccomp_rule_add(ctx, allow, number, 0) != 0:
            raise OSError(f"seccomp_rule_add({name}) failed")
    own = os.getpid()
    for name in _SELF_SIGNALS:                          # kill(own pid, ...), tgkill(own, ...)
        number = lib.seccomp_syscall_resolve_name(name.encode())
        if number >= 0 and lib.seccomp_rule_add_exact(
                ctx, allow, number, 1, ArgCmp(0, 4, own, 0)) != 0:   # SCMP_CMP_EQ = 4
            raise OSError(f"seccomp_rule_add({name}) failed")
    # fcntl, but not F_SETPIPE_SZ: 1 MB pipe buffers x the open-file limit would be
    # kernel memory outside the block's address-space limit (64 KB each stays).
    for name in ("fcntl", "fcntl64"):
        number = lib.seccomp_syscall_resolve_name(name.encode())
        if number >= 0 and lib.seccomp_rule_add_exact(
                ctx, allow, number, 1, ArgCmp(1, 1, 1031, 0)) != 0:   # SCMP_CMP_NE = 1
            raise OSError(f"seccomp_rule_add({name}) failed")
    # prlimit64(0, resource, NULL, &old) is how libc reads its own limits; setting
    # any (a non-NULL new limit) or another process's stays refused.
    number = lib.seccomp_syscall_resolve_name(b"prlimit64")
    if number >= 0 and lib.seccomp_rule_add_exact(
            ctx, allow, number, 2, ArgCmp(0, 4, 0, 0), ArgCmp(2, 4, 0, 0)) != 0:
        raise OSError("seccomp_rule_add(prlimit64) failed")
    if lib.seccomp_load(ctx) != 0:                       # sets no_new_privs itself
        raise OSError("seccomp_load failed")


def drop_capabilities(loaded) -> None:
    """No capability left: bounding set emptied, then effective, permitted,
    inheritable (and with them ambient) cleared."""
    ctypes, _ = loaded
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(64):                           # PR_CAPBSET_DROP; past the last: EINVAL
        libc.prctl(24, cap, 0, 0, 0)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
    empty = (ctypes.c_uint32 * 6)()                 # effective, permitted, inheritable x2
    if libc.capset(ctypes.byref(Header(0x20080522, 0)), empty) != 0:  # _LINUX_CAPABILITY_VERSION_3
        raise OSError(ctypes.get_errno(), "could not drop the sandbox's capabilities")
    libc.prctl(47, 4, 0, 0, 0)                      # PR_CAP_AMBIENT_CLEAR_ALL


def mount_scratch(loaded, size_bytes: int, files: int) -> None:
    """Inside bubblewrap: a mount namespace of our own (owned by our user
    namespace, so the capabilities bubblewrap left us may mount in it), a tmpfs
    of `size_bytes` holding at most `files` inodes on /tmp.  The tmpfs goes
    away with the process; the capabilities go right after (runner.py)."""
    import os
    ctypes, _ = loaded
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x00020000) != 0:               # CLONE_NEWNS
        raise OSError(ctypes.get_errno(), "could not make the scratch folder (unshare)")
    options = f"size={int(size_bytes)},nr_inodes={int(files)},mode=1777".encode()
    if libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 2 | 4, options) != 0:   # MS_NOSUID | MS_NODEV
        raise OSError(ctypes.get_errno(), "could not make the scratch folder (mount)")
    os.chdir("/tmp")


def drop_root(loaded) -> None:
    """The plain-process confinement's share of what bubblewrap gives: become
    nobody with an empty bounding set and no capabilities, then (where the
    kernel lets an unprivileged user) move into a user, network, IPC and UTS
    namespace of its own.  The namespaces are a second wall behind seccomp,
    which already refuses files, sockets and signals to others; a kernel that
    forbids them leaves that wall alone."""
    import os
    ctypes, _ = loaded
    libc = ctypes.CDLL(None, use_errno=True)
    if os.geteuid() == 0:
        for cap in range(64):                       # PR_CAPBSET_DROP; past the last: EINVAL
            libc.prctl(24, cap, 0, 0, 0)
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)                            # clears permitted and effective sets
    libc.prctl(47, 4, 0, 0, 0)                      # PR_CAP_AMBIENT_CLEAR_ALL
    # CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
    if libc.unshare(0x10000000 | 0x40000000 | 0x08000000 | 0x04000000) == 0:
        drop_capabilities(loaded)                   # a new namespace starts with them all
