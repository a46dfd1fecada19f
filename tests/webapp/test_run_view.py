"""The run view draws a run as its author arranged it in the editor (the
document's `metadata.layout`), and a rejected approval reads as rejected on
the graph and the timeline, not as "succeeded"."""

from __future__ import annotations

from tests.webapp.conftest import shot
from tests.webapp.test_accessibility import serious_violations
from tests.webapp.test_approvals import REFUND, start_and_wait

WIDTHS = (1280, 390)

#: the refund workflow laid out sideways in the editor: left to right, where the
#: automatic layout would stack it top to bottom
PLACED = {**REFUND, "metadata": {"layout": {
    "quote": {"x": 0, "y": 0}, "manager": {"x": 320, "y": 0},
    "paid": {"x": 640, "y": -90}, "refused": {"x": 640, "y": 90}}}}


async def axe_at_both_widths(page, where: str) -> None:
    """axe-core at a desktop's width and a phone's: no serious or critical violation."""
    before = page.viewport_size
    for width in WIDTHS:
        await page.set_viewport_size({"width": width, "height": 900})
        assert await serious_violations(page) == [], f"{where} at {width} px"
    await page.set_viewport_size(before)


async def box(page, block: str) -> dict:
    return await page.locator(f"[data-block-id={block}]").bounding_box()


async def test_the_run_view_uses_the_editors_layout_and_shows_a_rejection(web, page):
    async with web.client("alice") as alice:
        saved = await alice.post("/api/workflows", json=PLACED)
        assert saved.status_code == 201, saved.text
    await start_and_wait(page, web)

    # where the author put them: side by side, not one under the other
    quote, manager = await box(page, "quote"), await box(page, "manager")
    paid, refused = await box(page, "paid"), await box(page, "refused")
    assert manager["x"] > quote["x"] + quote["width"], (quote, manager)
    assert abs(manager["y"] - quote["y"]) < 2, (quote, manager)
    assert paid["x"] > manager["x"] + manager["width"] and paid["y"] < refused["y"]

    approval = page.get_by_role("region", name="Approval")
    await approval.get_by_label("Comment (optional)").fill("not covered")
    await approval.get_by_role("button", name="Reject").click()
    await page.locator("[aria-label='Run status'] .status-succeeded").wait_for()
    await page.locator("[data-block-id=refused][data-state=succeeded]").wait_for()

    # the approval rejected: said so on the graph, in its panel and on the timeline
    await page.locator("[data-block-id=manager][data-state=rejected]").wait_for()
    assert "rejected" in await page.locator("[data-block-id=manager]").text_content()
    panel = page.get_by_role("complementary", name="Block manager")
    assert await panel.get_by_role("heading").first.locator(".status-rejected").count() == 1
    await panel.get_by_role("button", name="Close").click()
    row = page.get_by_label("Timeline").locator("[data-timeline-block=manager]")
    assert "manager, rejected," in await row.text_content()     # what a screen reader says
    assert await row.locator(".timeline-bar[data-pass='2']").get_attribute("class") == \
        "timeline-bar state-rejected"
    assert await page.locator("[data-block-id=quote][data-state=succeeded]").count() == 1
    await axe_at_both_widths(page, "the run view of a rejected approval")
    await shot(page, "60-run-rejected-placed")

    # the same from the stored events alone
    await page.reload()
    await page.locator("[data-block-id=manager][data-state=rejected]").wait_for()
    assert (await box(page, "manager"))["x"] > (await box(page, "quote"))["x"]
