"""Warnings for documents whose meaning changed when joins became explicit.

A block used to run once *any* incoming edge was active, so a block on a
branch not taken still ran when it also read an always-run block.  Now every
dependency is required unless it is in a join (`after: {any: [...]}`, or a
plain `after:` list of two or more).  A document written for the old rule
keeps working, but some blocks now run less often; `validate` (and a server
saving the document) points those out, each at its place, with the two ways
to say what was meant.  Documents whose meaning is unchanged get nothing.

The check is static: an edge is *uncertain* when its source may not run for
the block (a route, a block downstream of one, an `on_error` handler, a
block after one that has a handler), and each block carries the uncertain
edges ("gates") that decide whether it runs.  A block is reported when a
required uncertain edge sits beside another edge that can be active without
it (its gates are not a superset) - the only case where the two rules
differ - or when a plain `after:` list of alternatives sits beside an
always-active edge.
"""

from __future__ import annotations

from flowforge.errors import Problem
from flowforge.workflow.graph import ERROR, Graph, Node
from flowforge.workflow.model import Join

__all__ = ["join_warnings"]

Gate = tuple[str, str]      # an uncertain edge: (source, target)


def join_warnings(graph: Graph) -> list[Problem]:
    """Located warnings for every block whose outcome the explicit-join rule changes."""
    found: list[Problem] = []
    _check_scope(graph, found)
    return found


def _check_scope(graph: Graph, found: list[Problem]) -> None:
    nodes = graph.nodes
    gates: dict[str, frozenset[Gate]] = {}

    def edge_gates(source: str, target: str) -> frozenset[Gate]:
        own = _uncertain_itself(nodes[source], nodes[target])
        return gates_of(source) | ({(source, target)} if own else frozenset())

    def gates_of(nid: str) -> frozenset[Gate]:
        # Iterative (chains of thousands of blocks): settle dependencies first.
        stack = [nid]
        while stack:
            current = stack[-1]
            if current in gates:
                stack.pop()
                continue
            missing = [s for s in nodes[current].inputs if s in nodes and s not in gates]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            node = nodes[current]
            collected: set[Gate] = set()
            members: list[set[Gate]] = []
            for source in node.inputs:
                if source in nodes:
                    edge = set(gates[source])
                    if _uncertain_itself(nodes[source], node):
                        edge.add((source, current))
                    if source in node.joins:
                        members.append(edge)
                    else:
                        collected |= edge
            if members:                # a join runs when any member ran: what they share
                collected |= set.intersection(*members)
            gates[current] = frozenset(collected)
        return gates[nid]

    for node in nodes.values():
        if node.children is not None:
            _check_scope(node.children, found)
        if isinstance(node.spec.after, Join) or len(node.inputs) < 2:
            continue                   # explicit, or nothing to join
        local = [s for s in node.inputs if s in nodes]
        required = [s for s in local if s not in node.joins]
        by_edge = {s: edge_gates(s, node.id) for s in local}
        warning = None
        for source in required:
            if nodes[source].info.routes and node.inputs[source] != ERROR:
                continue               # a route's own target always needed choosing
            mine = by_edge[source]
            if not mine:
                continue
            other = next((s for s in local if s != source and not by_edge[s] >= mine), None)
            if other is not None:
                warning = _changed(node, source, other, nodes)
                break
        if warning is None and node.joins and any(not by_edge[s] for s in required) \
                and all(by_edge[s] for s in node.joins):
            always = next(s for s in required if not by_edge[s])
            members = ", ".join(sorted(node.joins))
            warning = (f"'{node.id}' waits for one of {members} (a plain `after:` list is a "
                       f"join of alternatives) and also needs '{always}', which always runs. "
                       f"It used to run after '{always}' even when none of {members} ran; now "
                       f"it runs only when one of them ran. To run it in any case, write "
                       f"`after: {{any: [{', '.join(sorted({*node.joins, always}))}]}}`; "
                       f"`after: {{any: [{members}]}}` states the new meaning and silences "
                       f"this")
        if warning is not None:
            found.append(Problem(node.where, warning))


def _uncertain_itself(source: Node, target: Node) -> bool:
    """Whether the edge may not run for its target even when its source ran or failed."""
    if target.inputs.get(source.id) == ERROR:
        return True                    # it runs only when the source fails
    return source.info.routes or source.spec.on_error is not None


def _changed(node: Node, source: str, other: str, nodes: dict[str, Node]) -> str:
    origin = nodes[source]
    if node.inputs[source] == ERROR:
        why = f"it is the on_error handler of '{source}', so it runs only when '{source}' fails"
    elif origin.spec.on_error is not None:
        why = (f"'{source}' has an on_error handler ('{origin.spec.on_error}'), so when it "
               f"fails the blocks after it are not taken")
    elif origin.info.routes:
        why = f"'{source}' chooses a route and may not choose '{node.id}'"
    else:
        why = f"'{source}' is on a branch that may not be taken"
    written = node.spec.after_ids()
    required = [s for s in written if s not in node.joins] or [source]
    return (f"'{node.id}' needs '{source}', which may not run ({why}), and also '{other}'. "
            f"It used to run when '{other}' ran even if '{source}' did not; now every "
            f"dependency must have run, so it is skipped with '{source}'. If either is "
            f"enough, write a join: `after: {{any: [{source}, {other}]}}`; "
            f"`after: {{all: [{', '.join(required)}]}}` states the new meaning and silences "
            f"this")
