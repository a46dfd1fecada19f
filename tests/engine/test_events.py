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
