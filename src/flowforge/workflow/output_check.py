"""Every `{{block.field}}` must name a field that block gives.

A reference to a missing field resolves to None at run time (the seed's safe
fallback), so `{{assess.amout}}` for a `set` block with `amount` would
render an empty string and nothing would say why.  Each block type tells
what it can of its output from the document alone (`output_fields`: a `set`
block's keys, an evaluator's metrics, a schema's properties; None when the
output is open, as an agent's free answer is); this module checks the first
field of every template and expression reference against that, in every
scope: a loop's children read `loop.previous.<child>.<field>`, a loop's
`until` reads its children directly.  Deeper paths (`{{fetch.body.items}}`)
and open outputs are not checked: only the document's own promises are.

Kept out of `compile` on purpose: compiling builds the graph; this reads it.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from flowforge.errors import Problem
from flowforge.workflow import expressions, templates
from flowforge.workflow.graph import NAMESPACES, Graph, Node
from flowforge.hints import did_you_mean

__all__ = ["output_problems", "declared_outputs"]

_log = logging.getLogger(__name__)


def output_problems(doc: Any, graph: Graph,
                    known: Mapping[str, set[str] | None] | None = None) -> list[Problem]:
    """Each reference to a field that its block does not give, located.

    `known` overrides what a block type says, by block id (a nested
    `workflow` block's outputs, known once its document is loaded)."""
    checker = _Checker(doc, known or {})
    checker.scope(graph, {}, None)
    return checker.problems


def declared_outputs(node: Node, doc: Any) -> set[str] | None:
    """The top-level fields of `node`'s output as its block type reads them in
    the document (`output_fields`); None when they are open, and when its
    `with` does not fit its config (the hook would read a malformed one).

    A hook that raises (a plugin's bug, or a document it did not expect) must
    not crash `validate` nor refuse a right document, so the output is taken
    as open; the exception is logged, naming the block type and the block, so
    the plugin's author can find it."""
    if not node.config_ok:
        return None
    try:
        fields = node.info.output_fields(node.spec, doc)
    except Exception:  # noqa: BLE001 - a third-party hook tripping: the output is open
        _log.warning("block type '%s': output_fields raised for %s; its output is taken "
                     "as open", node.type, node.where, exc_info=True)
        return None
    return None if fields is None else set(fields)


def _named(graph: Graph) -> dict[str, Node]:
    """Template root -> node, for one scope (ids and normalised names)."""
    return {name: graph.nodes[nid] for name, nid in graph.names.items() if nid in graph.nodes}


class _Checker:
    def __init__(self, doc: Any, known: Mapping[str, set[str] | None]) -> None:
        self.doc = doc
        self.known = known
        self.problems: list[Problem] = []
        self.cache: dict[int, set[str] | None] = {}

    def fields(self, node: Node) -> set[str] | None:
        if id(node) not in self.cache:
            self.cache[id(node)] = self._fields(node)
        return self.cache[id(node)]

    def _fields(self, node: Node) -> set[str] | None:
        if node.id in self.known:
            return self.known[node.id]
        fields = declared_outputs(node, self.doc)
        if fields is None:
            return None
        if node.spec.on_error is not None:
            # a failed block's output is `{error}`, which its handler reads
            fields.add("error")
        return fields

    def scope(self, graph: Graph, outer: dict[str, Node],
              loop_children: dict[str, Node] | None) -> None:
        visible = {**outer, **_named(graph)}
        for node in graph.nodes.values():
            own = _named(node.children) if node.children is not None else {}
            for ref in _references(node):
                self.check(ref, node, visible, own, loop_children)
            if node.children is not None:
                inner = {name: other for name, other in visible.items() if other is not node}
                self.scope(node.children, inner, own if node.type == "loop" else None)

    def check(self, ref: templates.Reference, node: Node, visible: dict[str, Node],
              own: dict[str, Node], loop_children: dict[str, Node] | None) -> None:
        path = ref.path
        if not path:
            return
        root = path[0]
        if root == "loop":
            if loop_children is not None and len(path) >= 3 and path[1] == "previous":
                self.check_previous(ref, loop_children)
            return
        if root in NAMESPACES or len(path) < 2:
            return
        normalized = templates.normalize_name(root)
        target = (own.get(root) or own.get(normalized) or visible.get(root)
                  or visible.get(normalized))
        if target is None or target is node:
            return                                # compiling reported it
        self.check_field(ref, root, target, path[1])

    def check_previous(self, ref: templates.Reference, children: dict[str, Node]) -> None:
        """`loop.previous.<child>.<field>`: a child of this loop, and a field it gives."""
        name = ref.path[2]
        child = children.get(name) or children.get(templates.normalize_name(name))
        if child is None:
            ids = sorted({node.id for node in children.values()})
            self.problems.append(Problem(ref.where, f"no block '{name}' in this loop in "
                                         f"{ref.text}{did_you_mean(name, ids)}; "
                                         f"`loop.previous` holds the loop's child blocks: "
                                         f"{', '.join(ids)}"))
        elif len(ref.path) >= 4:
            self.check_field(ref, name, child, ref.path[3])

    def check_field(self, ref: templates.Reference, root: str, target: Node,
                    field: str) -> None:
        fields = self.fields(target)
        if fields is None or field in fields:
            return
        listed = ", ".join(sorted(fields)) or "none"
        self.problems.append(Problem(
            ref.where, f"block '{root}' has no output '{field}' in {ref.text}"
                       f"{did_you_mean(field, fields)}; its outputs: {listed}"))


def _references(node: Node) -> list[templates.Reference]:
    """Every template and expression reference of a block's `with`, located
    (a malformed one is skipped: compiling already reported it)."""
    info, spec, where = node.info, node.spec, node.where
    raw = info.raw_fields
    try:
        refs = [ref for ref in templates.references_in(
            {k: v for k, v in spec.with_.items() if k not in raw}, f"{where}.with")
            if not ref.problem]
    except expressions.ExpressionError:
        refs = []
    if not node.config_ok:
        return refs
    try:
        sources = list(info.expressions(spec))
    except Exception:  # noqa: BLE001 - reported by compiling
        return refs
    for location, source in sources:
        try:
            refs.extend(templates.Reference(f"{where}.with.{location}", path, source)
                        for path in expressions.names_in(source))
        except expressions.ExpressionError:
            continue
    return refs

