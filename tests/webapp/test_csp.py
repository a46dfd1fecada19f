"""The app works under its own Content-Security-Policy (only its own scripts,
requests only to this server): sign in, a workflow's graph and editor, a run,
with no violation reported by Chromium."""

from __future__ import annotations

import re

from playwright.async_api import expect

from tests.webapp.conftest import EXAMPLES, SUPPORT_BLOCKS, sign_in


async def test_the_app_runs_under_its_content_security_policy(web, browser):
    async with web.client("alice") as alice:
        saved = await alice.post("/api/workflows", content=(EXAMPLES / "support.yaml").read_text(),
                                 headers={"Content-Type": "application/yaml"})
        assert saved.status_code == 201, saved.text
    context = await browser.new_context(viewport={"width": 1500, "height": 1000})
    page = await context.new_page()
    messages: list[str] = []
    page.on("console", lambda message: messages.append(message.text))
    page.on("pageerror", lambda error: messages.append(str(error)))
    try:
        await sign_in(page, web, at="/workflows/support")
        await expect(page.locator("[data-block-id]")).to_have_count(SUPPORT_BLOCKS)
        await page.get_by_text("No problems: the document is valid.").wait_for()
        await page.get_by_role("link", name="Run...").click()
        await page.get_by_role("button", name="Start the run").click()
        await page.wait_for_url(re.compile(r".*/runs/[0-9a-f]+$"))
        await page.locator("[aria-label='Run status'] .status-succeeded").wait_for(timeout=60_000)
        await expect(page.locator("[data-block-id=review][data-state=skipped]")).to_have_count(1)
    finally:
        await context.close()
    assert not [m for m in messages if "Content Security Policy" in m or "Refused" in m], messages
