"""A model's answer appears in the block's panel while it is being written
(`llm_delta` events), then the whole response; a provider in this test holds
the answer half-written until the page has shown the first words."""

from __future__ import annotations

import asyncio
import re

from flowforge.providers.base import LLMResponse, Provider
from flowforge.providers.resolve import register_provider
from tests.server.conftest import start_server
from tests.webapp.conftest import shot, sign_in

RELEASE: dict[str, asyncio.Event] = {}


class _HalfWritten(Provider):
    name = "halfwritten"

    async def complete(self, request, on_delta=None):
        assert on_delta is not None and request.stream
        on_delta("Refunds are ")
        on_delta("processed ")
        await RELEASE["event"].wait()
        on_delta("within five days.")
        return LLMResponse(text="Refunds are processed within five days.", model=request.model)


register_provider("halfwritten", lambda name, options: (_HalfWritten(), name))


async def test_streamed_tokens_show_in_the_block_panel(tmp_path, page):
    RELEASE["event"] = asyncio.Event()
    live, stop = await start_server(f"sqlite:///{tmp_path / 'server.db'}",
                                    model="halfwritten/m")
    try:
        async with live.client("alice") as alice:
            saved = await alice.post("/api/workflows", json={"id": "ask", "blocks": [
                {"id": "answer", "type": "agent", "with": {"prompt": "How fast are refunds?"}}]})
            assert saved.status_code == 201, saved.text
        await sign_in(page, live, at="/workflows/ask/run")
        await page.get_by_role("button", name="Start the run").click()
        await page.wait_for_url(re.compile(r".*/runs/[0-9a-f]+$"))
        await page.locator("[data-block-id=answer][data-state=running]").click()
        panel = page.get_by_role("complementary", name="Block answer")
        streamed = panel.get_by_label("Streamed text")
        await streamed.wait_for()
        assert (await streamed.text_content()) == "Refunds are processed "
        await shot(page, "20-streaming")
        RELEASE["event"].set()
        await page.locator("[aria-label='Run status'] .status-succeeded").wait_for()
        assert "Refunds are processed within five days." in \
            await panel.get_by_label("Response 1").text_content()
    finally:
        RELEASE["event"].set()
        await stop()
