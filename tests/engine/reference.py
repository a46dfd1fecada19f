"""A reference interpreter of flowforge's run rules, written to be read, not
to be fast: tests/engine/test_reference.py runs generated graphs through the
scheduler and through this, and compares which blocks ran, were skipped,
failed or wait.

It reads a small description of a graph, not a workflow document, so it
shares no code with the engine.  A block is a dict:

    id        unique in the whole document
    kind      ok | fail | cond | approval | loop | parallel | nested
    reads     ids of blocks it reads (templates, expressions); for a
              container also what its children read of the outer graph
    after     [] | [ids] | {"all": [ids], "any": [ids]}
    on_error  id of a later block, or None
    goto      cond: the block its first true case names, or None
    targets   cond: every block it names (cases and default)
    on_reject approval: the block that runs when rejected, or None
    decision  approval: approve | reject | None (not decided yet)
    times     loop and parallel: passes or items
    children  loop, parallel, nested: the child graph (a list of blocks)

The rules (docs/guides/workflows.md, "Routing" and "Failures"):

1. A block's dependencies are what it reads, its `after:` entries, the
   router, condition or approval that names it, and the block whose
   `on_error` it is.  Those of an `any` group - or of a plain `after:` list of
   two or more, with what the block reads of them - are alternatives (one
   must run); every other one is required.
2. A dependency *ran for* a block when it succeeded and, if it chooses
   routes, chose it; the `on_error` dependency runs for its handler by
   failing.
3. Downstream of an unhandled failure everything is skipped; downstream of a
   block that waits everything is pending (never skipped): it runs, or the
   route skips it, once the run is resumed.
4. Otherwise a block runs when every required dependency ran for it and, if
   it has alternatives, at least one of them did.  Else it is skipped.
5. A run with a block that waits is waiting, even when another branch
   failed: the independent branches still run, a waiting one included.
   Once nothing waits, the run failed if a failure was not handled.
"""

from __future__ import annotations

from typing import Any

__all__ = ["interpret", "edges_of", "Edge"]

class Edge:
    """How a dependency counts for a block: it runs for it by running or by
    failing (`on_error`), and it is required or one of alternatives."""

    def __init__(self, by_failing: bool, alternative: bool) -> None:
        self.by_failing = by_failing
        self.alternative = alternative


def edges_of(blocks: list[dict[str, Any]]) -> dict[str, dict[str, Edge]]:
    """Block id -> {dependency id: Edge} (rule 1)."""
    ids = {block["id"] for block in blocks}
    alternatives: dict[str, list[str]] = {}
    edges: dict[str, dict[str, Edge]] = {block["id"]: {} for block in blocks}
    for block in blocks:
        after = block.get("after") or []
        if isinstance(after, dict):
            required, alternatives[block["id"]] = list(after.get("all", [])), \
                list(after.get("any", []))
        elif len(after) >= 2:
            required, alternatives[block["id"]] = [], list(after)
        else:
            required, alternatives[block["id"]] = list(after), []
        for dep in [*block.get("reads", []), *required, *alternatives[block["id"]]]:
            if dep in ids:           # an outer block, for a child graph: not an edge here
                edges[block["id"]][dep] = Edge(False, dep in alternatives[block["id"]])
    for block in blocks:
        named = list(block.get("targets") or [])
        if block.get("on_reject"):
            named.append(block["on_reject"])
        for target in named:
            edges[target].setdefault(block["id"], Edge(False, False))
        handler = block.get("on_error")
        if handler:
            edges[handler][block["id"]] = Edge(True, block["id"] in alternatives[handler])
    return edges


def interpret(blocks: list[dict[str, Any]], label: str | None = None,
              statuses: dict[tuple[str | None, str], str] | None = None
              ) -> tuple[str, dict[tuple[str | None, str], str]]:
    """Run a graph by the rules: (the run's status, (scope label, block id) ->
    succeeded | failed | skipped | waiting | pending for every block that settled, child
    scopes included).  Blocks come in an order where dependencies come first."""
    statuses = {} if statuses is None else statuses
    edges = edges_of(blocks)
    by_id = {block["id"]: block for block in blocks}
    status: dict[str, str] = {}
    cause: dict[str, str] = {}           # why a block did not run: failed | waiting | not taken
    chosen: dict[str, set[str]] = {}     # a routing block -> the blocks it chose
    for block in blocks:
        bid = block["id"]
        deps = edges[bid]

        def ran_for(dep: str, edge: Edge) -> bool:
            if edge.by_failing:
                return status[dep] == "failed"
            return status[dep] == "succeeded" and (dep not in chosen or bid in chosen[dep])

        upstream = {cause.get(dep) for dep in deps}
        if any(status[dep] == "failed" and not by_id[dep].get("on_error") for dep in deps) \
                or "failed" in upstream:
            status[bid], cause[bid] = "skipped", "failed"
        elif any(status[dep] == "waiting" for dep in deps) or "waiting" in upstream:
            status[bid], cause[bid] = "pending", "waiting"
        else:
            required = [ran_for(dep, edge) for dep, edge in deps.items()
                        if not edge.alternative]
            alternatives = [ran_for(dep, edge) for dep, edge in deps.items()
                            if edge.alternative]
            if all(required) and (not alternatives or any(alternatives)):
                status[bid] = _run(block, label, statuses, chosen, edges)
                if status[bid] == "failed" and not block.get("on_error"):
                    cause[bid] = "failed"
                elif status[bid] == "waiting":
                    cause[bid] = "waiting"
            else:
                status[bid], cause[bid] = "skipped", "not taken"
        statuses[(label, bid)] = status[bid]
    if "waiting" in status.values():
        return "waiting", statuses
    if any(s == "failed" and not by_id[b].get("on_error") for b, s in status.items()):
        return "failed", statuses
    return "succeeded", statuses


def _run(block: dict[str, Any], label: str | None, statuses: dict, chosen: dict,
         edges: dict[str, dict[str, Edge]]) -> str:
    """Run one block whose dependencies let it: its own status."""
    kind, bid = block["kind"], block["id"]
    inner = f"{label}/" if label else ""
    if kind == "ok":
        return "succeeded"
    if kind == "fail":
        return "failed"
    if kind == "cond":
        chosen[bid] = {block["goto"]} if block.get("goto") else set()
        return "succeeded"
    if kind == "approval":
        if block.get("decision") is None:
            return "waiting"
        after_it = {other for other, deps in edges.items() if bid in deps}
        if block["decision"] == "approve":
            chosen[bid] = after_it - {block.get("on_reject")}
            return "succeeded"
        if block.get("on_reject"):
            chosen[bid] = {block["on_reject"]}
            return "succeeded"
        return "failed"
    if kind == "loop":                   # passes in turn; a failed pass ends the loop
        for index in range(block["times"]):
            outcome, _ = interpret(block["children"], f"{inner}{bid}[{index}]", statuses)
            if outcome == "failed":
                return "failed"
        return "succeeded"
    if kind == "parallel":               # every item runs; one failed item fails the block
        outcomes = [interpret(block["children"], f"{inner}{bid}[{index}]", statuses)[0]
                    for index in range(block["times"])]
        return "failed" if "failed" in outcomes else "succeeded"
    if kind == "nested":
        outcome, _ = interpret(block["children"], f"{inner}{bid}", statuses)
        return "failed" if outcome == "failed" else "succeeded"
    raise ValueError(f"unknown kind {kind!r}")
