"""The pool's shape: one room (`flowforge.service.pool`) with one door (its
`__init__`).  The server, the CLI and the workers import the door, never a
room's module; inside, modules import each other one way only (every import,
also those inside functions: a cycle through a late import is still a ring);
and the pool imports nothing of the layers above the service."""

from __future__ import annotations

import ast
from pathlib import Path

import flowforge.service.pool as pool

SRC = Path(pool.__file__).resolve().parents[2]          # src/flowforge
ROOM = "flowforge.service.pool"


def _imports(path: Path) -> set[str]:
    """Every module `path` imports (anywhere in it), as dotted names."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def _modules(path: Path) -> set[str]:
    """The modules `path` names in its imports (not the names it takes from them)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def _module(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _room() -> dict[str, set[str]]:
    """Each module of the room -> the modules of the room it imports."""
    modules = {_module(p): p for p in (SRC / "service" / "pool").glob("*.py")}
    return {name: {other for other in _imports(path) if other in modules and other != ROOM}
            for name, path in modules.items() if name != ROOM}


def test_the_pool_modules_import_each_other_one_way():
    graph = _room()
    assert len(graph) >= 8, graph
    done: set[str] = set()

    def visit(name: str, trail: list[str]) -> None:
        assert name not in trail, "import ring: " + " -> ".join(trail[trail.index(name):]
                                                               + [name])
        if name in done:
            return
        for other in sorted(graph[name]):
            visit(other, trail + [name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])


def test_everything_outside_the_pool_comes_in_by_the_door():
    inside = SRC / "service" / "pool"
    knocked = {}
    for path in SRC.rglob("*.py"):
        if inside in path.parents:
            continue
        rooms = {name for name in _modules(path) if name.startswith(ROOM + ".")}
        if rooms:
            knocked[str(path.relative_to(SRC))] = sorted(rooms)
    assert knocked == {}


def test_the_pool_imports_nothing_from_above_the_service():
    above = ("flowforge.server", "flowforge.cli")
    for path in (SRC / "service" / "pool").glob("*.py"):
        assert not {name for name in _imports(path) if name.startswith(above)}, path


def test_the_old_ring_is_gone():
    for old in ("queue", "queue_follow", "schedules", "process_loop"):
        assert not (SRC / "service" / f"{old}.py").exists(), old
