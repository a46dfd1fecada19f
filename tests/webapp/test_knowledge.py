"""The knowledge page: the shared bases listed, a base of one's own created,
a Markdown file uploaded with tags, and a search showing hits with scores
and tags."""

from __future__ import annotations

import re

import pytest
from playwright.async_api import expect

from tests.apps.conftest import knowledge, knowledge_path  # noqa: F401 - fixtures
from tests.server.conftest import start_server
from tests.webapp.conftest import shot, sign_in
from tests.webapp.test_accessibility import serious_violations


@pytest.fixture
async def kb_web(tmp_path, knowledge, knowledge_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("FLOWFORGE_KNOWLEDGE_URL", f"sqlite:///{knowledge_path}")
    live, stop = await start_server(f"sqlite:///{tmp_path / 'server.db'}")
    yield live
    await stop()


async def test_create_upload_and_search_a_knowledge_base(kb_web, page, tmp_path):
    note = tmp_path / "electronics.md"
    note.write_text("# Opened electronics\n\nOpened electronics can be returned within 14 days "
                    "if every accessory is in the box; a restocking fee of 10 percent applies.")
    await sign_in(page, kb_web)
    await page.get_by_role("link", name="Knowledge").click()
    shared = page.locator("tr", has=page.get_by_role("link", name="policies"))
    await expect(shared.locator("td").nth(1)).to_have_text("shared")
    assert await serious_violations(page) == []
    await shot(page, "18-knowledge-bases")

    await page.get_by_label("New knowledge base").fill("returns")
    await page.get_by_role("button", name="Create").click()
    await page.wait_for_url("**/knowledge/returns")
    await page.get_by_text("No documents yet.").wait_for()
    await page.get_by_label("Tags (e.g. category: policies, legal)").fill("category: returns")
    await page.set_input_files("#kb-upload", str(note))
    await page.get_by_text(re.compile(r"electronics\.md: \d+ chunk\(s\) indexed\.")).wait_for()
    row = page.locator("tbody tr", has_text="electronics.md")
    await expect(row.locator("td").nth(1)).to_have_text("category: returns")

    await page.get_by_role("searchbox", name="Search").fill("restocking fee for opened electronics")
    await page.get_by_role("button", name="Search", exact=True).click()
    hit = page.get_by_role("list", name="Hits").locator("li").first
    await hit.wait_for()
    text = await hit.text_content()
    assert "electronics.md" in text and "category: returns" in text
    assert float(re.search(r"score (\d\.\d+)", text).group(1)) > 0
    assert await serious_violations(page) == []
    await shot(page, "19-knowledge-search")
