"""Every error flowforge raises on purpose is drawn in `errors.py`'s tree
(as httpx draws its own): under its real base, and, when it lives beside its
code, with the file a caller imports it from."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import flowforge
from flowforge import errors
from flowforge.errors import FlowforgeError

SRC = Path(flowforge.__file__).resolve().parent


def _drawn() -> dict[str, tuple[str | None, str | None]]:
    """Name -> (its parent in the drawing, the [file] it names) for each tree line."""
    drawn: dict[str, tuple[str | None, str | None]] = {}
    parents: list[str] = []
    for line in errors.__doc__.splitlines():
        found = re.match(r"^ {4}((?:[│ ] {3}|[├└]── )*)([A-Z]\w+)(?:\s+\[([\w/.]+)\])?", line)
        if not found or (found.group(1) == "" and found.group(2) != "FlowforgeError"):
            continue
        depth = len(found.group(1)) // 4
        parents[depth:] = [found.group(2)]
        drawn[found.group(2)] = (parents[depth - 1] if depth else None, found.group(3))
    return drawn


def _raised() -> dict[str, type]:
    """Every FlowforgeError subclass defined in the package, by name."""
    found = {}
    for module in pkgutil.walk_packages(flowforge.__path__, "flowforge."):
        loaded = importlib.import_module(module.name)
        for cls in vars(loaded).values():
            if inspect.isclass(cls) and issubclass(cls, FlowforgeError) and \
                    cls.__module__ == loaded.__name__:
                found[cls.__name__] = cls
    return found


def test_every_error_is_in_the_tree_under_its_base_and_says_where_it_lives():
    drawn, raised = _drawn(), _raised()
    assert len(raised) >= 30
    assert set(raised) - set(drawn) == set(), "draw these in errors.py's tree"
    assert set(drawn) - set(raised) == set(), "the tree draws errors that are gone"
    for name, cls in raised.items():
        parent, where = drawn[name]
        assert parent == (cls.__base__.__name__ if cls is not FlowforgeError else None), name
        if cls.__module__ == "flowforge.errors":
            assert where is None, name
        else:
            assert where and (SRC / where).is_file(), name
            assert cls.__module__ == "flowforge." + where[:-3].replace("/", "."), name
