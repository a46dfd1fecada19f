"""Loopback ports for the servers the tests start as processes.

A port found free is free only until someone binds it: with four workers
starting servers, another test's server can take it between the pick and
the bind of the server it was picked for, and then answer that test's
health checks.  So a server started on a picked port counts as up only when
`listens(its pid, port)`."""

from __future__ import annotations

import os
import socket

__all__ = ["free_port", "listens"]


def free_port() -> int:
    """A loopback TCP port nobody listens on at this moment."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def listens(pid: int, port: int) -> bool:
    """Whether process `pid` holds a socket listening on TCP `port` (Linux's /proc)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:             # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as rows:
            for row in list(rows)[1:]:
                fields = row.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port \
                        and inode in inodes:
                    return True
    return False
