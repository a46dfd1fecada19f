"""The suite's own order (tests/conftest.py): the slow files go to the
workers first, so no slow file runs alone at the end of `make test`."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]


def _conftest(request):
    return next(plugin for plugin in request.config.pluginmanager.get_plugins()
                if hasattr(plugin, "SLOW_FILES"))


def test_every_slow_file_named_exists(request):
    """A renamed file would silently lose its place: the list is kept true."""
    named = _conftest(request).SLOW_FILES
    assert [name for name in named if not (ROOT / name).is_file()] == []
    assert len(set(named)) == len(named)


def test_slow_files_first_then_by_number_of_tests_and_each_file_kept_together(request):
    conftest = _conftest(request)
    slow, slower = conftest.SLOW_FILES[1], conftest.SLOW_FILES[0]
    ids = ["tests/a.py::one", f"{slow}::x", "tests/b.py::one", "tests/a.py::two",
           f"{slower}::y", "tests/b.py::two", "tests/b.py::three", f"{slow}::z"]
    items = [SimpleNamespace(nodeid=nodeid) for nodeid in ids]
    conftest.pytest_collection_modifyitems(None, None, items)
    assert [item.nodeid for item in items] == [
        f"{slower}::y", f"{slow}::x", f"{slow}::z",
        "tests/b.py::one", "tests/b.py::two", "tests/b.py::three",
        "tests/a.py::one", "tests/a.py::two"]


def test_xdist_keeps_the_order(request):
    """xdist would sort the files by their number of tests again."""
    assert request.config.option.loadscopereorder is False
