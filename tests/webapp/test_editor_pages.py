"""Small things a person sees around the editor, in Chromium: the palette's
and the forms' descriptions show code as code, never raw backticks; the
menu links the manual at /manual/.  Screenshots (FLOWFORGE_SCREENSHOTS=1):
tests/webapp/screenshots/pages-*.png."""

from __future__ import annotations

from playwright.async_api import expect

from tests.webapp.conftest import shot, sign_in
from tests.webapp.test_editor_structure import axe_at_both_widths


async def test_descriptions_have_no_raw_backticks_and_the_menu_links_the_manual(web, page):
    async with web.client("alice") as alice:
        schema = (await alice.get("/api/schema")).json()
    kinds = schema["$defs"]["BlockSpec"]["properties"]["type"]["oneOf"]
    ticked = [k["const"] for k in kinds if "`" in k["description"] and k["const"] != "registry"]
    assert ticked, "no block type's description has code in it: the test shows nothing"
    await sign_in(page, web)
    await expect(page.get_by_role("link", name="Manual")).to_have_attribute("href", "/manual/")
    await page.get_by_role("button", name="New workflow").click()
    await page.get_by_role("button", name="Add block").click()
    types = page.get_by_role("dialog", name="Add a block").get_by_role("list", name="Block types")
    await expect(types.get_by_role("button").first).to_be_visible()
    assert "`" not in await types.text_content()
    assert await types.locator("code").count() > 0
    await types.get_by_role("button", name="loop", exact=True).click()
    form = page.get_by_role("form", name="Settings of loop_1")
    assert "`" not in await form.text_content()
    await shot(page, "pages-01-descriptions")
    await axe_at_both_widths(page)
