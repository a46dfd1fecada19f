"""Which file a request's path names under a folder the server serves (the
web app's assets, the manual): one guard for both, so a path no file can
have is a 404 on every such route, never a 500."""

from __future__ import annotations

from pathlib import Path

__all__ = ["file_under"]


def file_under(root: Path, name: str, *, index: str | None = None) -> Path | None:
    """The file `name` names under `root`, never outside it; a folder gives
    its `index` file when one is named.  None for no such file, and for a
    name no file can have: a NUL byte, a name or path the system finds too
    long (ENAMETOOLONG from `stat`), an encoding it refuses."""
    if "\x00" in name:
        return None
    try:
        base = root.resolve()
        candidate = (base / name).resolve()
        if candidate != base and base not in candidate.parents:
            return None
        if index is not None and candidate.is_dir():
            candidate = candidate / index
        return candidate if candidate.is_file() else None
    except (OSError, ValueError):
        return None
