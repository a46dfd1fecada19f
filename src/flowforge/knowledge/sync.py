"""A knowledge base that mirrors declared sources: a `knowledge` block's
`sources:`, the chat's `--kb <folder>`, the offline web's folder.

A synced document is known by where it sits inside its source, named as the
source was declared, not by where that source lives on this machine:
`sources: [policies]` stores `policies/refunds.md`.  So the same workflow run
from a second clone, or after its folder moved, finds the documents it
stored (an unchanged one costs a hash) instead of adding every one again,
and searches do not return the same passage twice.  The base mirrors the
sources: a synced document whose file is gone, or whose source is no longer
declared, is removed.  Documents added by other means (`flowforge kb add`,
the API) are not synced, and a sync leaves them alone.

Bases synced before this rule knew their files by absolute path.  A sync
takes such a document over, keeping its vectors, when it is the same file:
the file at that very path, or a file with the same path inside a folder of
the same name and the same content (another clone, a moved folder).  Further
copies of it, the duplicates the old rule left, are removed.  The other way
round, `flowforge kb add` of a folder a sync already holds (the same file,
unchanged) finds it there and stores nothing (`synced_twin`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Callable, Mapping

from flowforge.knowledge.ingest import SourceDocument, load_path
from flowforge.knowledge.store import DocumentInfo

__all__ = ["source_label", "load_sources", "SyncPlan", "plan_sync", "synced_twin",
           "is_file_path", "undeclared_sources"]


def source_label(written: str | Path) -> str:
    """How a declared source names its documents: as written, tidied
    (`./policies/` and `policies` are the same source)."""
    return PurePosixPath(str(written).replace("\\", "/")).as_posix()


def load_sources(sources: Mapping[str, Path],
                 tags: Mapping[str, list[str]] | None = None) -> list[tuple[str, SourceDocument]]:
    """(label, document) for every document of the sources ({label: file or
    folder}), each known as `label/<path inside>`; a document reached twice
    (a file also inside a declared folder) once."""
    loaded: dict[str, tuple[str, SourceDocument]] = {}
    for label, path in sources.items():
        for doc in load_path(path, tags, source=label):
            loaded.setdefault(doc.source, (label, doc))
    return list(loaded.values())


@dataclass
class SyncPlan:
    """What a sync changes besides adding: stored documents it takes over
    (id, the source it knows them by) and documents it removes."""

    adopt: list[tuple[int, str]] = field(default_factory=list)
    remove: list[DocumentInfo] = field(default_factory=list)


def plan_sync(loaded: list[tuple[str, SourceDocument]], digest: Callable[[SourceDocument], str],
              sources: Mapping[str, Path], existing: list[DocumentInfo]) -> SyncPlan:
    """The plan for syncing `loaded` (load_sources' answer) into a base holding
    `existing` (see the module docstring); `digest(doc)` is a document's content
    hash, asked only while documents stored by absolute path are left to take over
    (adding hashes every document again)."""
    by_source = {doc.source: doc for doc in existing}
    legacy = [doc for doc in existing if not doc.synced and is_file_path(doc.source)]
    roots = {label: Path(path).resolve() for label, path in sources.items()}
    plan = SyncPlan()
    taken: set[int] = set()
    for label, doc in loaded:
        stored = by_source.get(doc.source)
        if stored is not None and not stored.synced:       # a source of its own (JSONL lines)
            plan.adopt.append((stored.id, doc.source))
            taken.add(stored.id)
        rest = _rest(doc.source, label)
        if rest is None or not legacy:
            continue
        here = _slashes(str(roots[label])) + rest
        tail = f"/{roots[label].name}{rest}"
        content_hash = digest(doc)
        same = [old for old in legacy if old.id not in taken and (
            _slashes(old.source) == here
            or old.content_hash == content_hash and _slashes(old.source).endswith(tail))]
        if not same:
            continue
        same.sort(key=lambda old: _slashes(old.source) != here)    # the file itself first
        taken.update(old.id for old in same)
        if stored is None:
            plan.adopt.append((same[0].id, doc.source))
            same = same[1:]
        plan.remove += same
    wanted = {doc.source for _, doc in loaded}
    plan.remove += [doc for doc in existing if doc.synced and doc.source not in wanted]
    return plan


def undeclared_sources(removed: list[DocumentInfo], sources: Mapping[str, Path]) -> list[str]:
    """Where the synced documents of `removed` came from, for those that lie
    under none of `sources`' labels: a sync that removes them is either told a
    source was taken off its list or, every run, undoing another workflow's
    sync of the same base; the caller says so rather than only counting."""
    return sorted({doc.source.rsplit("/", 1)[0] for doc in removed
                   if doc.synced and not is_file_path(doc.source)
                   and all(_rest(doc.source, label) is None for label in sources)})


def synced_twin(source: str, digest: str, synced: list[DocumentInfo]) -> DocumentInfo | None:
    """The synced document that a file added by its absolute path `source`
    (content hash `digest`) already is: the same content, at a path ending in
    the synced document's path inside its source."""
    path = _slashes(source)
    for doc in synced:
        if doc.content_hash != digest:
            continue
        inside = PurePosixPath(*[part for part in PurePosixPath(_slashes(doc.source)).parts
                                 if part not in (".", "..")]).as_posix()
        if path == inside or path.endswith(f"/{inside}"):
            return doc
    return None


def _rest(source: str, label: str) -> str | None:
    """What follows the label in a synced source (`/refunds.md`, `#3`, ``); None
    for a document that names its own source (a JSONL line's `metadata.source`)."""
    if source == label:
        return ""
    if source.startswith(label) and source[len(label)] in "/#":
        return source[len(label):]
    return None


def _slashes(path: str) -> str:
    return path.replace("\\", "/")


def is_file_path(source: str) -> bool:
    """A file's absolute path (POSIX or Windows): how `kb add` knows a file, and
    how syncs knew theirs before."""
    return source.startswith("/") or source[1:3] in (":\\", ":/")
