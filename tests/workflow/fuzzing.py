"""Generators of hostile and odd workflow documents, shared by the fuzz test
(tests/workflow/test_fuzz_documents.py) and the longer run in
bench/fuzz_documents.py."""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p for p in (ROOT / "examples").rglob("*.yaml")
                  if "scripted" not in p.parts and "build" not in p.parts)
BLOCK_TYPES = ["input", "response", "set", "function", "condition", "loop", "parallel",
               "workflow", "agent", "router", "evaluator", "guardrail", "llm", "parser", "http",
               "knowledge", "web_search", "progress", "registry", "nonsense"]

ODD_TEXT = st.sampled_from([
    "{{input.q}}", "{{", "}}", "{{ }}", "{{unknown.block}}", "{{env}}", "{{secrets}}",
    "{{env.HOME}}", "{{loop.item}}", "{{a.b.c.d.e.f}}", "{{ input.q | upper }}",
    "await x", "(1).real.real.real.real.real.real.real.real.real.real", "2**99999",
    "lambda: 1", "[x for x in y]", "__import__('os')", "input.__class__", "\ud800", "\x00",
    "a" * 5000, "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "local/smollm2", "lokal/x", "scripted//etc/passwd", "../../x.yaml",
    "/etc/passwd", "http://169.254.169.254/", "true", "null", "9" * 40, "-1", "1e999",
])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(10 ** 30), 10 ** 30),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30),
                    ODD_TEXT)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10) | ODD_TEXT, inner,
                                                 max_size=4)), max_leaves=12)
KEYS = st.sampled_from(["id", "type", "with", "after", "on_error", "timeout", "retry", "uses",
                        "blocks", "name", "prompt", "cases", "when", "goto", "default", "expr",
                        "until", "max_iterations", "for_each", "times", "tools", "model",
                        "inputs", "variables", "defaults", "memory", "env", "webhook",
                        "concurrency", "sources", "range", "metrics", "schema", "function"])


@st.composite
def blocks(draw: Any, depth: int = 0) -> dict[str, Any]:
    block: dict[str, Any] = {"id": draw(st.sampled_from(["a", "b", "c", "d", "input", "x-1"])
                                        | st.text(max_size=8)),
                             "type": draw(st.sampled_from(BLOCK_TYPES))}
    block["with"] = draw(st.dictionaries(KEYS, VALUES, max_size=5))
    for key in draw(st.lists(KEYS, max_size=3)):
        block[key] = draw(VALUES)
    if depth < 2 and draw(st.booleans()):
        block["blocks"] = draw(st.lists(blocks(depth + 1), max_size=3))
    return block


@st.composite
def documents(draw: Any) -> Any:
    document: dict[str, Any] = {"id": draw(st.sampled_from(["w", "flow-1"]) | st.text(max_size=6)),
                                "blocks": draw(st.lists(blocks(), max_size=5))}
    for key in draw(st.lists(st.sampled_from(["inputs", "variables", "defaults", "memory",
                                              "env", "webhook", "concurrency", "version",
                                              "name"]), max_size=4)):
        document[key] = draw(VALUES)
    if draw(st.booleans()):
        document["inputs"] = draw(st.dictionaries(
            st.text(min_size=1, max_size=5),
            st.dictionaries(st.sampled_from(["type", "default", "enum", "pattern", "minimum",
                                             "items", "$ref", "format"]), VALUES, max_size=3),
            max_size=3))
    if draw(st.booleans()):
        return yaml.safe_dump(document, allow_unicode=True) if draw(st.booleans()) \
            else document
    return document


def _nodes(data: Any, path: tuple = ()) -> list[tuple]:
    found = [path]
    if isinstance(data, dict):
        for key, value in data.items():
            found += _nodes(value, (*path, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            found += _nodes(value, (*path, index))
    return found


def _set(data: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    target = data
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return data


@st.composite
def example_mutations(draw: Any) -> Any:
    """A shipped example with a few of its values replaced, keys dropped or
    nesting deepened; sometimes as YAML text with an alias or a huge number."""
    path = draw(st.sampled_from(EXAMPLES))
    data = yaml.safe_load(path.read_text())
    for _ in range(draw(st.integers(1, 4))):
        places = _nodes(data)
        where = draw(st.sampled_from(places))
        action = draw(st.sampled_from(["replace", "drop", "deepen", "odd"]))
        if action == "drop" and where:
            parent = data
            for part in where[:-1]:
                parent = parent[part]
            del parent[where[-1]]
        elif action == "deepen":
            value = data if not where else None
            for part in where:
                value = (value if value is not None else data)[part] if value is not None \
                    else data[part]
            nested: Any = value
            for _ in range(draw(st.integers(1, 120))):
                nested = [nested]
            data = _set(data, where, nested)
        elif action == "odd":
            data = _set(data, where, draw(ODD_TEXT))
        else:
            data = _set(data, where, draw(VALUES))
    if not draw(st.booleans()):
        return data
    text = yaml.safe_dump(data, allow_unicode=True, width=10_000)
    extra = draw(st.sampled_from(["", "\nx: &a [1,1,1,1,1,1,1,1]\ny: [*a,*a,*a,*a,*a]\n",
                                  "\nz: " + "9" * 50 + "\n", "\n\t bad: [\n"]))
    return text + extra


def load_any(document: Any) -> str:
    """"ok", "invalid" (a WorkflowError), or what else came out, with its place."""
    import flowforge
    from flowforge.errors import WorkflowError

    try:
        if isinstance(document, str):
            flowforge.load_text(document, "fuzz.yaml")
        else:
            flowforge.load(document)
    except WorkflowError as exc:
        str(exc)
        return "invalid"
    except Exception as exc:  # noqa: BLE001 - this is what the fuzzer looks for
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        return f"crash: {type(exc).__name__}: {exc!s:.200} at {frame.filename}:{frame.lineno}"
    return "ok"
