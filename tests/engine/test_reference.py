"""The scheduler against the reference interpreter (tests/engine/reference.py)
on generated graphs: conditions, approvals decided either way, failures with
and without `on_error`, joins (`after: [a, b]`, `{any: ...}`, `{all: ...}`),
loops, parallel maps and nested workflows; cancelled at a random point and
resumed; resumed from every checkpoint a crash could leave.  Which blocks
ran, were skipped, failed or wait must be what the rules say, every time.

Runs go through `start_run` with an in-memory stand-in for the store (an
approval only needs to know the run can wait); resuming is done as
service/resuming.py does it - the succeeded blocks as the checkpoint, child
scopes by label, a waiting block's stored state with the decision injected -
and test_resume_through_the_store does it through `flowforge.resume` on a
real SQLite store."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import flowforge
from flowforge.service.runs import start_run
from tests.engine.reference import interpret

_SETTLED = {"block_succeeded": "succeeded", "block_failed": "failed",
            "block_skipped": "skipped", "block_waiting": "waiting",
            "block_cancelled": "cancelled"}
_INNER_IDS = itertools.count()
_NO_STORE = {"storage": object()}     # approvals wait only when a run can be resumed


@flowforge.function("ref_ok")
async def ref_ok(**reads: Any) -> dict:
    await asyncio.sleep(0)             # a point where a cancel can land
    return {"v": 1}


@flowforge.function("ref_fail")
def ref_fail(**reads: Any) -> dict:
    raise RuntimeError("generated failure")


# -- generated graphs ------------------------------------------------------------
@st.composite
def graphs(draw: Any, prefix: str = "b", outer: tuple[str, ...] = (), top: bool = True,
           size: tuple[int, int] = (2, 9)) -> list[dict[str, Any]]:
    """A graph in the reference's terms, dependencies before dependants."""
    count = draw(st.integers(*size))
    ids = [f"{prefix}{index}" for index in range(count)]
    kinds = ["ok", "ok", "fail", "cond", "cond"]
    if top:
        kinds += ["approval", "loop", "parallel", "nested"]
    blocks: list[dict[str, Any]] = []
    for index, bid in enumerate(ids):
        earlier, later = ids[:index], ids[index + 1:]
        kind = draw(st.sampled_from(kinds))
        block: dict[str, Any] = {"id": bid, "kind": kind, "reads": [], "after": []}
        if kind in ("ok", "fail") and (earlier or outer):
            block["reads"] = draw(st.lists(st.sampled_from(earlier + list(outer)),
                                           max_size=3, unique=True))
        if earlier:
            shape = draw(st.sampled_from(["none", "none", "one", "list", "any", "all", "mixed",
                                          "handler"]))
            failing = [b["id"] for b in blocks if b.get("on_error") == bid]
            if shape == "handler" and failing and len(earlier) >= 2:
                # a handler that also runs when another block runs: both in one join
                other = draw(st.sampled_from([e for e in earlier if e != failing[0]]))
                block["after"] = {"any": [failing[0], other]}
            pick = st.lists(st.sampled_from(earlier), min_size=1, max_size=3, unique=True)
            if shape == "one":
                block["after"] = draw(pick)[:1]
            elif shape == "list" and len(earlier) >= 2:
                block["after"] = draw(st.lists(st.sampled_from(earlier), min_size=2,
                                               max_size=3, unique=True))
            elif shape == "any" and len(earlier) >= 2:
                members = draw(st.lists(st.sampled_from(earlier), min_size=2, max_size=3,
                                        unique=True))
                block["after"] = {"any": members}
                # reading a member makes the read part of the join
                block["reads"] = [r for r in block["reads"]] + \
                    ([members[0]] if kind in ("ok", "fail") else [])
            elif shape == "all":
                block["after"] = {"all": draw(pick)}
            elif shape == "mixed" and len(earlier) >= 3:
                members = draw(st.lists(st.sampled_from(earlier), min_size=3, max_size=3,
                                        unique=True))
                block["after"] = {"all": members[:1], "any": members[1:]}
        block["reads"] = list(dict.fromkeys(block["reads"]))
        if kind in ("ok", "fail", "loop", "parallel", "nested") and later and \
                draw(st.booleans()):
            block["on_error"] = draw(st.sampled_from(later))
        if kind == "cond":
            targets = draw(st.lists(st.sampled_from(later), max_size=3, unique=True)) \
                if later else []
            truths = [draw(st.booleans()) for _ in targets]
            default = draw(st.sampled_from([None, *targets]))
            block.update(targets=targets, truths=truths, default=default,
                         goto=next((t for t, true in zip(targets, truths) if true), default))
            if not targets:
                block["kind"] = "ok"
        if kind == "approval":
            block["decision"] = draw(st.sampled_from(["approve", "reject"]))
            block["on_reject"] = draw(st.sampled_from([None, *later]))
        if kind in ("loop", "parallel", "nested"):
            visible = () if kind == "nested" else tuple(earlier) + outer
            block["children"] = draw(graphs(prefix=f"{bid}_", outer=visible, top=False,
                                            size=(1, 4)))
            block["times"] = draw(st.integers(1, 3))
            # what the children read of this graph is what the container needs
            block["reads"] = list(dict.fromkeys(
                r for child in block["children"] for r in child["reads"] if r in earlier))
        blocks.append(block)
    return blocks


def _document(blocks: list[dict[str, Any]], workflow_id: str = "generated") -> dict:
    out = []
    for block in blocks:
        kind, bid = block["kind"], block["id"]
        # A whole block's output: every kind of block has one (validation checks a
        # field against what the block gives, and a loop gives no `v`).
        reads = {f"r{i}": f"{{{{{dep}}}}}" for i, dep in enumerate(block["reads"])}
        if kind in ("ok", "fail"):
            entry: dict[str, Any] = {"type": "function", "with": {
                "function": f"ref_{kind}", "args": reads}}
        elif kind == "cond":
            cases = [{"when": "1 == 1" if true else "1 == 0", "goto": target}
                     for target, true in zip(block["targets"], block["truths"])]
            entry = {"type": "condition", "with": {"cases": cases, "default": block["default"]}}
        elif kind == "approval":
            entry = {"type": "approval", "with": {"message": f"{bid}?", "data": reads,
                                                  "on_reject": block["on_reject"]}}
        elif kind == "loop":
            entry = {"type": "loop", "with": {"times": block["times"]},
                     "blocks": _document(block["children"])["blocks"]}
        elif kind == "parallel":
            entry = {"type": "parallel", "with": {"for_each": list(range(block["times"])),
                                                  "max_concurrency": 2},
                     "blocks": _document(block["children"])["blocks"]}
        else:
            inner = f"ref-inner-{next(_INNER_IDS)}"
            flowforge.register_workflow(_document(block["children"], inner))
            entry = {"type": "workflow", "with": {"workflow": inner}}
        entry["id"] = bid
        if block["after"]:
            entry["after"] = block["after"]
        if block.get("on_error"):
            entry["on_error"] = block["on_error"]
        out.append(entry)
    return {"id": workflow_id, "blocks": out}


def _undecided(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**b, "decision": None} if b["kind"] == "approval" else b for b in blocks]


# -- running and comparing ----------------------------------------------------------
class Store:
    """What a store would hold of a run: its checkpoints, in the order taken."""

    def __init__(self) -> None:
        self.succeeded: list[tuple[str | None, str, Any]] = []
        self.waiting: dict[str, Any] = {}
        self.failed: dict[str, str] = {}      # top-level failures of the last run

    def take(self, result: Any) -> None:
        self.failed = {}
        for event in result.events:
            key = (event.get("scope"), event.get("block_id"))
            if event["type"] == "block_succeeded" and not event.get("resumed") and \
                    key not in {(s, b) for s, b, _ in self.succeeded}:
                self.succeeded.append((*key, event["output"]))
            elif event["type"] == "block_waiting" and key[0] is None:
                self.waiting[key[1]] = event["output"]
            elif event["type"] == "block_failed" and key[0] is None:
                self.failed[key[1]] = event["error"]

    def checkpoint(self, upto: int | None = None, going_on: bool = False
                   ) -> tuple[dict, dict]:
        """`going_on`: a waiting run resumed keeps its failures (resuming.py)."""
        top: dict[str, tuple[str, Any]] = {}
        children: dict[str, dict[str, tuple[str, Any]]] = {}
        if going_on:
            top.update((bid, ("failed", {"error": error})) for bid, error in self.failed.items())
        for scope, bid, output in self.succeeded[:upto]:
            if scope is None:
                top[bid] = ("succeeded", output)
            else:
                children.setdefault(scope, {})[bid] = ("succeeded", output)
        return top, children


async def _run(doc: Any, store: Store | None = None, upto: int | None = None,
               decisions: dict[str, str] | None = None, cancel_at: int | None = None,
               going_on: bool = False) -> Any:
    options: dict[str, Any] = {}
    if store is not None:
        top, children = store.checkpoint(upto, going_on)
        options = {"checkpoint": top, "child_checkpoints": children}
    handle = await start_run(doc, {}, storage=False, services=dict(_NO_STORE), **options)
    states = {bid: {**state} for bid, state in (store.waiting if store else {}).items()}
    for bid, decision in (decisions or {}).items():
        states.setdefault(bid, {"message": f"{bid}?", "data": None, "requested_at": 0.0,
                                "timeout_at": None})["decision"] = {
            "decision": decision, "by": "tester", "at": 1.0, "comment": None}
    handle.run.resume_state = states
    if cancel_at is not None:
        settled = itertools.count(1)

        def cancel_later(event: dict) -> None:
            if event["type"] in _SETTLED and next(settled) == cancel_at:
                asyncio.get_running_loop().call_soon(handle.cancel)

        handle.run.bus.subscribe(cancel_later)
    return await asyncio.wait_for(handle.wait(), 20)


def _all_statuses(result: Any) -> dict[tuple[str | None, str], str]:
    seen: dict[tuple[str | None, str], str] = {}
    for event in result.events:
        if event["type"] in _SETTLED:
            seen[(event.get("scope"), event["block_id"])] = _SETTLED[event["type"]]
        elif event["type"] == "run_waiting":       # the blocks held behind a wait
            seen.update(((None, bid), "pending") for bid in event["pending"])
    return seen


def _top(statuses: dict[tuple[str | None, str], str]) -> dict[str, str]:
    return {bid: status for (scope, bid), status in statuses.items() if scope is None}


def _check(result: Any, expected: tuple[str, dict], whole: bool, what: str) -> None:
    status, statuses = expected
    got = {bid: record.status for bid, record in result.blocks.items()}
    assert got == _top(statuses), f"{what}: top-level blocks differ"
    assert result.status == status, f"{what}: run status {result.status}, rules say {status}"
    if whole:
        assert _all_statuses(result) == statuses, f"{what}: blocks in child scopes differ"


async def _play(blocks: list[dict[str, Any]], cancel_at: int | None,
                prefixes: list[int] | None) -> None:
    doc = flowforge.load(_document(blocks))          # compiled once, run many times
    decisions = {b["id"]: b["decision"] for b in blocks if b["kind"] == "approval"}
    store = Store()
    first = await _run(doc, cancel_at=cancel_at)
    store.take(first)
    asked = interpret(_undecided(blocks))
    if first.status == "cancelled":
        first = await _run(doc, store)
        store.take(first)
        _check(first, asked, False, "resumed after a cancel")
    else:
        _check(first, asked, True, "first run")
    final = interpret(blocks)
    if first.status == "waiting":
        decided = await _run(doc, store, decisions=decisions, going_on=True)
        store.take(decided)
        _check(decided, final, False, "resumed with the decisions")
    for upto in (range(len(store.succeeded) + 1) if prefixes is None else prefixes):
        again = await _run(doc, store, upto=min(upto, len(store.succeeded)),
                           decisions=decisions)
        _check(again, final, False, f"resumed from checkpoint {upto}")


_SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck), database=None)


@settings(max_examples=1000, **_SETTINGS)
@given(blocks=graphs(), cancel=st.one_of(st.none(), st.integers(1, 12)),
       prefixes=st.lists(st.integers(0, 30), max_size=2))
def test_generated_graphs_run_by_the_rules(blocks, cancel, prefixes):
    asyncio.run(_play(blocks, cancel, prefixes))


@settings(max_examples=120, **_SETTINGS)
@given(blocks=graphs())
def test_resuming_from_every_checkpoint_ends_as_the_rules_say(blocks):
    asyncio.run(_play(blocks, None, None))


async def _through_the_store(blocks: list[dict[str, Any]], cancel_at: int | None,
                             url: str) -> None:
    """Cut the run off by cancelling it, then let `flowforge.resume` - the
    service's own path, from the SQLite store's checkpoints - finish it,
    deciding the approvals as they come."""
    doc = flowforge.load(_document(blocks))
    decisions = {b["id"]: {"decision": b["decision"], "by": "tester", "at": 1.0,
                           "comment": None} for b in blocks if b["kind"] == "approval"}
    handle = await start_run(doc, {}, storage=url)
    if cancel_at is not None:
        settled = itertools.count(1)

        def cancel_later(event: dict) -> None:
            if event["type"] in _SETTLED and next(settled) == cancel_at:
                asyncio.get_running_loop().call_soon(handle.cancel)

        handle.run.bus.subscribe(cancel_later)
    result = await asyncio.wait_for(handle.wait(), 20)
    # one resume after the cancel, then one per approval at most: each resume
    # may reach an approval not asked before (a chain of them asks one by one)
    for _ in range(1 + len(decisions)):
        if result.status not in ("waiting", "cancelled") and \
                "waiting" not in {r.status for r in result.blocks.values()}:
            break
        result = await flowforge.resume(result.run_id, storage=url, decisions=decisions)
    _check(result, interpret(blocks), False, "resumed through the store")


_APPROVAL_CHAIN = [{"id": "b0", "kind": "ok", "reads": [], "after": []}] + [
    {"id": f"b{i}", "kind": "approval", "reads": [], "after": [f"b{i - 1}"],
     "decision": "approve" if i < 4 else "reject", "on_reject": None} for i in range(1, 5)]


# Rejected approvals in two branches, one reached only by the other's
# rejection: it is asked on the resume that rejects the first, after the
# second failed the other branch (the run waits for it, and ends failed).
_REJECTED_BRANCHES = [
    {"id": "b0", "kind": "approval", "reads": [], "after": [], "decision": "reject",
     "on_reject": "b2"},
    {"id": "b1", "kind": "ok", "reads": [], "after": []},
    {"id": "b2", "kind": "approval", "reads": [], "after": [], "decision": "reject",
     "on_reject": None},
    {"id": "b3", "kind": "approval", "reads": [], "after": [], "decision": "reject",
     "on_reject": None}]


@settings(max_examples=60, **_SETTINGS)
@given(blocks=graphs(), cancel=st.one_of(st.none(), st.integers(1, 12)))
@example(blocks=_APPROVAL_CHAIN, cancel=1)      # a cancel, then four approvals one by one
@example(blocks=_REJECTED_BRANCHES, cancel=None)
def test_resume_through_the_store(tmp_path_factory, blocks, cancel):
    url = f"sqlite:///{tmp_path_factory.getbasetemp() / 'reference.db'}"
    asyncio.run(_through_the_store(blocks, cancel, url))
