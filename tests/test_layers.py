"""The package's layers and seams, read from the source with `ast`.

DESIGN.md draws the layers: a module imports only from its own layer or the
layers below it (every import counts, also those inside functions or under
TYPE_CHECKING: a late import is still a dependency).  And where two packages
meet they meet through public names: a private module (`blocks/_llm.py`) is
its own package's business, and a private name (`_stored_run`) its own
module's; another module that needs one asks for a public name instead.
(The pool's own shape, one room with one door, is tests/workers/test_pool_shape.py.)
"""

from __future__ import annotations

import ast
from pathlib import Path

import flowforge

SRC = Path(flowforge.__file__).resolve().parent          # src/flowforge

#: DESIGN.md's layers, top first, by top-level package (or module) of
#: flowforge.  `registry` (the block library), `sandbox` and `websearch` are
#: what blocks call, beside tools, knowledge and providers; every application
#: (chat, research, chains, thinker) is a package of `apps`.  The last row is
#: the foundation every layer may import (`safe_text` too: the store cleans the
#: session titles it keeps).
LAYERS = [
    {"cli", "server"},
    {"service"},
    {"apps"},
    {"formats"},
    {"engine"},
    {"blocks"},
    {"tools", "knowledge", "providers", "registry", "sandbox", "websearch"},
    {"workflow"},
    {"storage"},
    {"errors", "hints", "lazy", "model_strings", "processes", "safe_text", "tls"},
]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def _module(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module(path): path for path in SRC.rglob("*.py")}


def _package(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _imports(module: str, path: Path):
    """(line, imported module, imported name or None) for every flowforge import."""
    package = _package(module, path)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "flowforge":
                    yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] == "flowforge":
                for alias in node.names:
                    yield node.lineno, target, alias.name


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _layer(module: str) -> str:
    return module.split(".")[1] if "." in module else "flowforge"


def _crossings() -> list[str]:
    """Every import of a private module from outside its package, and every
    private name imported from another module (or read off an imported module)."""
    modules = _modules()
    found = []
    for module, path in sorted(modules.items()):
        package = _package(module, path)
        imported_modules: dict[str, str] = {}          # local name -> module
        for line, target, name in _imports(module, path):
            where = f"{path.relative_to(SRC.parent)}:{line}"
            parts = target.split(".")
            for i, part in enumerate(parts):
                owner = ".".join(parts[:i])
                if _private(part) and package != owner and \
                        not package.startswith(owner + "."):
                    found.append(f"{where}: private module {target}")
            if name is None:
                continue
            if f"{target}.{name}" in modules:
                imported_modules[name] = f"{target}.{name}"
                if _private(name) and package != target and \
                        not package.startswith(target + "."):
                    found.append(f"{where}: private module {target}.{name}")
            elif _private(name) and target != module:
                found.append(f"{where}: private name {name} of {target}")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                    node.value.id in imported_modules and _private(node.attr):
                owner = imported_modules[node.value.id]
                found.append(f"{path.relative_to(SRC.parent)}:{node.lineno}: "
                             f"private name {node.attr} of {owner}")
    return found


def _upward() -> list[str]:
    found = []
    for module, path in sorted(_modules().items()):
        here = _layer(module)
        if here == "flowforge":                    # the package's door: the public API
            continue
        for line, target, name in _imports(module, path):
            there = _layer(target)
            if there == "flowforge" and name == "__version__":
                continue                           # a constant, not a dependency
            if RANK[there] < RANK[here]:
                found.append(f"{path.relative_to(SRC.parent)}:{line}: {here} imports "
                             f"{target} ({there} is a layer above)")
    return found


def test_every_package_has_its_layer():
    packages = {_layer(module) for module in _modules()} - {"flowforge"}
    assert packages <= set(RANK), \
        f"add {sorted(packages - set(RANK))} to LAYERS here and to DESIGN.md's layer list"


def test_no_module_imports_from_a_layer_above_it():
    assert _upward() == []


def test_private_modules_and_names_stay_at_home():
    assert _crossings() == []


def test_the_walk_sees_what_it_must_refuse(tmp_path, monkeypatch):
    """The checks above pass on the package; here they fail on what they guard."""
    root = tmp_path / "flowforge"
    for folder in ("blocks", "engine", "service", "workflow"):
        (root / folder).mkdir(parents=True)
        (root / folder / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "blocks" / "_helper.py").write_text("_LIMIT = 1\n")
    (root / "blocks" / "agent.py").write_text("from flowforge.blocks._helper import _LIMIT\n")
    (root / "service" / "runs.py").write_text("from flowforge.blocks._helper import x\n"
                                              "from flowforge.workflow import loader\n"
                                              "loader._depth\n")
    (root / "workflow" / "loader.py").write_text("from flowforge.engine.run import Run\n")
    monkeypatch.setitem(globals(), "SRC", root)
    crossings = _crossings()
    assert any("service/runs.py:1: private module flowforge.blocks._helper" in c
               for c in crossings), crossings
    assert any("private name _depth of flowforge.workflow.loader" in c for c in crossings)
    assert any("blocks/agent.py:1: private name _LIMIT" in c for c in crossings)
    assert len(crossings) == 3, crossings
    assert _upward() == ["flowforge/workflow/loader.py:1: workflow imports flowforge.engine.run "
                         "(engine is a layer above)"]


def test_every_module_reads_in_one_sitting():
    """STYLE.md's small modules: a module past 500 lines is split along its
    seams (see docs/guides/developing.md), not allowed to grow."""
    long = {str(path.relative_to(SRC)): lines for path in SRC.rglob("*.py")
            if (lines := len(path.read_text(encoding="utf-8").splitlines())) >= 500}
    assert long == {}, f"split these modules along their seams: {long}"
