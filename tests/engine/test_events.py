"""The event bus: every consumer sees every event, in order, whatever the others do."""

from __future__ import annotations

import flowforge
from flowforge.engine.events import EventBus


def test_a_consumer_unsubscribing_inside_its_callback_does_not_make_another_miss_the_event():
    bus = EventBus("r1")
    seen: dict[str, list[str]] = {"once": [], "always": []}

    def once(event: dict) -> None:
        seen["once"].append(event["type"])
        unsubscribe_once()

    unsubscribe_once = bus.subscribe(once)
    bus.subscribe(lambda event: seen["always"].append(event["type"]))
    bus.publish("run_started")
    bus.publish("run_finished")
    assert seen == {"once": ["run_started"], "always": ["run_started", "run_finished"]}
    assert [e["seq"] for e in bus.events] == [1, 2]


async def test_on_event_sees_exactly_the_events_the_result_keeps():
    doc = {"id": "ev", "blocks": [{"id": "a", "type": "set", "with": {"v": 1}},
                                  {"id": "b", "type": "set", "with": {"v": "{{a.v}}"}}]}
    received: list[dict] = []
    result = await flowforge.run(doc, {}, storage=False, on_event=received.append)
    assert received == result.events
    assert [e["type"] for e in received] == [
        "run_started", "block_started", "block_succeeded", "block_started", "block_succeeded",
        "run_finished"]


_TWO_SETS = {"id": "ev", "blocks": [{"id": "a", "type": "set", "with": {"v": 1}},
                                    {"id": "b", "type": "set", "with": {"v": "{{a.v}}"}}]}


class _BrokenView:
    """An observer with a bug on one kind of event, as a progress view might have."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_event(self, event: dict) -> None:
        self.seen.append(event["type"])
        if event["type"] == "block_succeeded":
            raise KeyError("elapsed")


async def test_an_observer_that_raises_does_not_change_how_the_run_ends(caplog):
    view = _BrokenView()
    with caplog.at_level("ERROR", logger="flowforge.events"):
        result = await flowforge.run(_TWO_SETS, {}, storage=False, on_event=view.on_event)
    assert result.status == "succeeded" and result.error is None
    assert result.results == {"a": {"v": 1}, "b": {"v": 1}}
    # kept, not detached: it still saw every event, the end of the run included
    assert view.seen == [e["type"] for e in result.events] and view.seen[-1] == "run_finished"
    # logged once (it raised twice), naming the observer and the event type
    logged = [r for r in caplog.records if r.name == "flowforge.events"]
    assert len(logged) == 1
    assert "_BrokenView.on_event" in logged[0].getMessage()
    assert "'block_succeeded'" in logged[0].getMessage()
    assert logged[0].exc_info[0] is KeyError


async def test_a_raising_observer_leaves_the_stored_record_whole(tmp_path):
    def broken(event: dict) -> None:
        raise RuntimeError("observer bug")

    storage = f"sqlite:///{tmp_path / 'runs.db'}"
    result = await flowforge.run(_TWO_SETS, {}, storage=storage, on_event=broken)
    assert result.status == "succeeded"
    from flowforge.storage import storage_from_url
    async with storage_from_url(storage) as store:
        row = await store.get_run(result.run_id)
        stored = await store.get_events(result.run_id)
    assert row["status"] == "succeeded" and row["error"] is None
    assert [e["type"] for e in stored] == [e["type"] for e in result.events]


async def test_a_failing_block_still_fails_the_run_with_a_raising_observer():
    doc = {"id": "ev", "blocks": [{"id": "a", "type": "condition",
                                   "with": {"cases": [{"when": "1 / 0 > 1", "goto": "b"}]}},
                                  {"id": "b", "type": "set", "after": ["a"], "with": {"v": 1}}]}
    quiet = await flowforge.run(doc, {}, storage=False)
    noisy = await flowforge.run(doc, {}, storage=False,
                                on_event=lambda event: 1 / 0)
    assert quiet.status == noisy.status == "failed"
    assert {k: r.status for k, r in quiet.blocks.items()} == \
        {k: r.status for k, r in noisy.blocks.items()}
    assert quiet.error == noisy.error
