"""The run view's timeline: a time axis from the run's start, each block's
total time, and a block inside a loop drawn once per pass (not one bar from
its first pass to its last)."""

from __future__ import annotations

import re

from tests.webapp.conftest import EXAMPLES, shot, sign_in
from tests.webapp.test_accessibility import serious_violations


async def test_a_loops_blocks_are_drawn_per_pass_on_a_time_axis(web, page):
    async with web.client("alice") as alice:
        saved = await alice.post("/api/workflows", content=(EXAMPLES / "loop_until.yaml")
                                 .read_text(), headers={"Content-Type": "application/yaml"})
        assert saved.status_code == 201, saved.text
        ran = await alice.post("/api/workflows/loop-until/runs?wait=true", json={})
        assert ran.status_code == 200, ran.text
        run_id = ran.json()["run_id"]
    await sign_in(page, web, at=f"/runs/{run_id}")
    await page.locator("[aria-label='Run status'] .status-succeeded").wait_for()
    timeline = page.get_by_label("Timeline")
    await timeline.locator("[data-timeline-block=result]").wait_for()

    for block, passes in (("draft", 3), ("judge", 3), ("refine", 1), ("result", 1)):
        row = timeline.locator(f"[data-timeline-block={block}]")
        bars = row.locator(".timeline-bar")
        assert await bars.count() == passes, block
        if passes > 1:
            assert "in 3 passes" in await row.locator(".timeline-duration").text_content()
            lefts = [await bar.evaluate("el => parseFloat(el.style.left)")
                     for bar in await bars.all()]
            rights = [left + await bar.evaluate("el => parseFloat(el.style.width)")
                      for left, bar in zip(lefts, await bars.all())]
            assert lefts == sorted(lefts) and lefts[0] < lefts[-1], lefts
            # each pass is its own bar: none reaches across to the next pass
            assert all(rights[i] <= lefts[i + 1] + 0.5 for i in range(passes - 1)), \
                (lefts, rights)
        assert re.fullmatch(r"[\d.]+ (ms|s)( in \d passes)?|\d+ min \d+ s( in \d passes)?",
                            await row.locator(".timeline-duration").text_content())
    ticks = await timeline.locator(".timeline-tick").all_text_contents()
    assert ticks[0] == "0" and len(ticks) >= 3, ticks
    assert all(re.fullmatch(r"[\d.]+ (ms|s)|\d+ min \d+ s", tick) for tick in ticks[1:]), ticks
    assert re.search(r"The run took [\d.]+ (ms|s)", await timeline.text_content())
    assert await serious_violations(page) == []
    await shot(page, "54-timeline-loop")
