"""Where a relative path written in a document points: one rule for every kind
of path (nested workflows, knowledge sources, workflow tools, web-search
folders, `scripted/<rules>` and `local/<file.gguf>` models).

- On the command line and in Python, a relative path resolves against the
  folder of the document's own file, as an `import` or an `<img src>` does:
  `flowforge run examples/nested.yaml` finds `examples/nested/greeting.yaml`
  whatever the working directory.  A document built in memory has no file:
  its paths resolve against the working directory.
- On a server, against one documented root: `flowforge serve --files-root`
  (FLOWFORGE_FILES_ROOT) when given, else the folder the document's file came
  from when the server knows it, else nowhere: the path is refused with a
  message naming --files-root.  Never the server's working directory, which
  nobody documents and which changes with how the service was started.

A run on a server says so by carrying `files_root` among its services (None
when not configured); a queued CLI run carries its document's folder as
`document_dir`, so a worker elsewhere resolves as the CLI would have.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from flowforge.errors import WorkflowError

__all__ = ["FILES_ROOT", "DOCUMENT_DIR", "document_folder", "document_root", "resolve_path",
           "model_cache", "weights_fingerprint"]

#: The run service a server sets: its files root (a folder, or None when not configured).
FILES_ROOT = "files_root"
#: The run service a queued CLI run sets: its document's folder.
DOCUMENT_DIR = "document_dir"


def document_folder(source: Any) -> Path | None:
    """The folder of the file a document came from (`source` is that file, or
    already a folder); None for a document with no file."""
    if source is None:
        return None
    path = Path(source)
    return path.parent if path.suffix else path


def document_root(source: Any, services: Mapping[str, Any] | None) -> Path | None:
    """The folder the relative paths of a document from `source` resolve
    against, for a run with these `services`; None when a server has no root
    for them (resolve_path then refuses the path)."""
    services = services or {}
    folder = document_folder(source) or document_folder(services.get(DOCUMENT_DIR))
    if FILES_ROOT in services:                     # a server's run
        root = services[FILES_ROOT]
        return Path(root) if root else folder
    return folder or Path.cwd()


def resolve_path(reference: str | Path, root: Path | None, what: str) -> Path:
    """`reference` as a path: as written when absolute, else under `root`
    (document_root's answer).  `what` names it in the refusal ("nested
    workflow", "knowledge source", ...)."""
    path = Path(reference).expanduser()
    if path.is_absolute():
        return path
    if root is None:
        raise WorkflowError(f"{what} '{reference}' is a relative path and this server has no "
                            f"folder to resolve it against: start the server with "
                            f"`flowforge serve --files-root DIR` (or FLOWFORGE_FILES_ROOT=DIR) "
                            f"to resolve relative paths under DIR, or write an absolute path")
    return Path(root) / path


def model_cache() -> Path:
    """Where models built from installed packages are cached (the embedding
    model's ONNX file, the local model's Q8_0 copy): `FLOWFORGE_MODEL_CACHE`,
    else the user's cache directory."""
    import os

    from platformdirs import user_cache_dir

    return Path(os.environ.get("FLOWFORGE_MODEL_CACHE")
                or Path(user_cache_dir("flowforge")) / "models")


def weights_fingerprint(path: str | Path) -> str:
    """A short name for a weights file's content, for the names of what the
    model cache builds from it.  Keyed on content, not on modification time:
    every install or checkout of the same package writes the same weights with
    a new time, and a time-keyed cache built a 90 MB copy for each of them.
    The file's size and 16 slices of 64 KiB spread over it are read (~1 MiB,
    a millisecond): other weights of the same size differ in all of them."""
    import hashlib

    digest = hashlib.sha256()
    size = Path(path).stat().st_size
    digest.update(str(size).encode())
    with open(path, "rb") as weights:
        for index in range(16):
            weights.seek(max(0, size - 65536) * index // 15)
            digest.update(weights.read(65536))
    return digest.hexdigest()[:12]
