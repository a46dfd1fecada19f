"""Dark mode follows the system setting (prefers-color-scheme: Playwright's
`color_scheme`) with axe-core at 0 serious or critical on every page at a
desktop's and a phone's width; the runs table on a phone shows each run's
Status, Started and Finished without scrolling sideways; descriptions show
`code` as code, not raw backticks."""

from __future__ import annotations

from tests.webapp.conftest import EXAMPLES, shot, sign_in
from tests.webapp.test_accessibility import serious_violations
from tests.webapp.test_approvals import REFUND
from tests.webapp.test_narrow import PAGES, filled, sideways  # noqa: F401 - the fixture

#: the pages this branch added, on top of test_narrow's (`{waiting}`: a run at its approval)
MORE = [("/approvals", "article"), ("/secrets", "tbody tr"), ("/runs/{waiting}", ".approval")]


async def test_every_page_in_dark_mode_passes_axe_at_both_widths(web, filled, browser):  # noqa: F811
    async with web.client("alice") as alice:
        assert (await alice.post("/api/workflows", json=REFUND)).status_code == 201
        waiting = (await alice.post("/api/workflows/refund/runs?wait=true", json={})).json()
        assert waiting["status"] == "waiting", waiting
        assert (await alice.post("/api/secrets", json={"name": "API_TOKEN", "value": "x"})
                ).status_code == 201
    context = await browser.new_context(viewport={"width": 1280, "height": 900},
                                        color_scheme="dark", bypass_csp=True)
    page = await context.new_page()
    page.set_default_timeout(30_000)
    try:
        await sign_in(page, web)
        background = await page.evaluate("getComputedStyle(document.documentElement).backgroundColor")
        assert background == "rgb(18, 21, 28)", background          # the dark ground
        for path, ready in [*PAGES, *MORE]:
            await page.goto(web.url + path.format(run=filled, waiting=waiting["run_id"]))
            await page.locator(ready).first.wait_for()
            for width in (1280, 390):
                await page.set_viewport_size({"width": width, "height": 900})
                where = f"{path} in dark mode at {width} px"
                assert await serious_violations(page) == [], where
                assert await sideways(page) == 0, where
            await page.set_viewport_size({"width": 1280, "height": 900})
            await shot(page, f"64-dark{path.replace('/', '-').replace('{run}', 'run').replace('{waiting}', 'waiting')}")
    finally:
        await context.close()


async def test_the_runs_table_on_a_phone_shows_status_and_times(web, filled, browser):  # noqa: F811
    context = await browser.new_context(viewport={"width": 390, "height": 844}, bypass_csp=True)
    page = await context.new_page()
    try:
        await sign_in(page, web)
        await page.get_by_role("navigation", name="Main").get_by_role("link", name="Runs").click()
        table = page.get_by_role("table")
        row = table.get_by_role("row").nth(1)                 # the header row is the first
        await row.wait_for()
        for column in ("Status", "Started", "Finished"):
            assert await table.get_by_role("columnheader", name=column).count() == 1
        cells = row.get_by_role("cell")
        assert await cells.count() == 6
        texts = [await cell.inner_text() for cell in await cells.all()]
        labels = [await cell.evaluate("el => getComputedStyle(el, '::before').content")
                  for cell in await cells.all()]
        assert labels[3:] == ['"Status"', '"Started"', '"Finished"'], labels
        assert texts[3] == "succeeded" and texts[4].endswith(" UTC") and texts[5].endswith(" UTC")
        for index in (3, 4, 5):                 # in view, whole, without scrolling sideways
            box = await cells.nth(index).bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= 390, (index, box)
        assert await sideways(page) == 0
        region = await page.get_by_role("region", name="Runs").evaluate(
            "el => el.scrollWidth - el.clientWidth")
        assert region == 0
        assert await serious_violations(page) == []
        await shot(page, "65-phone-runs-cards")
    finally:
        await context.close()


async def test_descriptions_show_code_not_backticks(web, page):
    text = (EXAMPLES / "support.yaml").read_text().replace(
        "description: Answer a customer's refund question, check the answer, and route it.",
        "description: Answers from the `policies` base, graded by `grade`.", 1)
    assert "`grade`" in text
    async with web.client("alice") as alice:
        saved = await alice.post("/api/workflows", content=text,
                                 headers={"Content-Type": "application/yaml"})
        assert saved.status_code == 201, saved.text
    await sign_in(page, web)
    row = page.get_by_role("row", name="Support")
    cell = row.get_by_role("cell").nth(1)
    await cell.get_by_text("Answers from the").wait_for()
    assert "`" not in await cell.inner_text()
    assert await cell.locator("code").all_text_contents() == ["policies", "grade"]
