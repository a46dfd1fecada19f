"""The knowledge page: the shared bases listed, a base of one's own created,
a Markdown file uploaded with tags, and a search showing hits with scores
and tags."""

from __future__ import annotations

import re

import pytest_asyncio
from playwright.async_api import expect

from tests.apps.conftest import knowledge, knowledge_path  # noqa: F401 - fixtures
from tests.server.conftest import start_server
from tests.webapp.conftest import SESSION_LOOP, shot, sign_in
from tests.webapp.test_accessibility import serious_violations


@pytest_asyncio.fixture(loop_scope=SESSION_LOOP)
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
    await page.get_by_text(re.compile(r"Indexed electronics\.md \(\d+ chunks?\)\.")).wait_for()
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


async def test_names_uploads_hits_and_deleting(kb_web, page, tmp_path):
    files = []
    for number in range(1, 8):
        path = tmp_path / f"note-{number}.md"
        path.write_text(f"---\ntitle: Note {number}\ntags: {{category: notes}}\n---\n"
                        f"Note {number}: the quarterly lantern inventory lists {number} "
                        f"lanterns in the north shed.")
        files.append(str(path))
    await sign_in(page, kb_web, at="/knowledge")

    # a bad name is refused in words, before any request
    await page.get_by_label("New knowledge base").fill("team/notes")
    await page.get_by_role("button", name="Create").click()
    alert = page.get_by_role("alert")
    await expect(alert).to_contain_text("'team/notes' cannot be a name")
    assert "^" not in await alert.text_content() and "pattern" not in await alert.text_content()

    await page.get_by_label("New knowledge base").fill("lanterns")
    await page.get_by_role("button", name="Create").click()
    await page.wait_for_url("**/knowledge/lanterns")
    await page.get_by_text("No documents yet.").wait_for()

    # a search before there is anything: no hits; adding documents answers it again
    await page.get_by_role("searchbox", name="Search").fill("lantern inventory north shed")
    await page.get_by_role("button", name="Search", exact=True).click()
    await page.get_by_text(re.compile("^No hits")).wait_for()
    await page.set_input_files("#kb-upload", files)
    notice = page.get_by_role("status")
    await expect(notice).to_contain_text("Indexed 7 files")
    for number in range(1, 8):
        await expect(notice).to_contain_text(f"note-{number}.md")
    await expect(page.locator("tbody tr")).to_have_count(7)
    hits = page.get_by_role("list", name="Hits").locator("li")
    await expect(hits).to_have_count(5)
    await expect(page.get_by_text(re.compile("^No hits"))).to_have_count(0)
    texts = await hits.all_text_contents()
    scores = [float(re.search(r"score (\d\.\d+)", text).group(1)) for text in texts]
    assert scores == sorted(scores, reverse=True), scores
    assert not any("title:" in text or "---" in text for text in texts), texts

    # delete one document (asked twice), then the whole base
    await page.get_by_role("button", name="Delete note-3.md").click()
    await page.get_by_role("button", name="Yes, delete note-3.md").click()
    await expect(notice).to_have_text("Deleted note-3.md.")
    await expect(page.locator("tbody tr")).to_have_count(6)
    assert "note-3.md" not in " ".join(await page.locator("tbody tr").all_text_contents())
    assert await serious_violations(page) == []
    await shot(page, "51-knowledge-delete")
    await page.get_by_role("button", name="Delete the knowledge base").click()
    await page.get_by_role("button", name="Yes, delete lanterns").click()
    await page.wait_for_url("**/knowledge?deleted=lanterns")
    await page.get_by_text("Knowledge base lanterns deleted.").wait_for()
    await expect(page.get_by_role("link", name="lanterns")).to_have_count(0)
    async with kb_web.client("alice") as alice:
        assert (await alice.get("/api/knowledge/lanterns/documents")).status_code == 404

    # a shared base offers neither uploads nor deletes
    await page.goto(kb_web.url + "/knowledge/policies")
    await page.locator("tbody tr").first.wait_for()
    await page.get_by_text("(shared: an administrator changes it)").wait_for()
    assert await page.get_by_role("button", name=re.compile("^Delete")).count() == 0
    assert await page.locator("#kb-upload").count() == 0
