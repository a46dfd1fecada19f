"""Files in and out of the editor, in Chromium: a workflow of another tool
imported from the workflows page (POST /api/import; a refusal names the
nodes without a counterpart and offers a partial import) opens unsaved in
the editor with its report; the YAML downloads as written; two saved
versions compare as a line diff.  Screenshots (FLOWFORGE_SCREENSHOTS=1):
tests/webapp/screenshots/files-*.png."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import expect

from tests.webapp.conftest import ROOT, shot, sign_in
from tests.webapp.test_canvas import editor_text
from tests.webapp.test_editor_structure import axe_at_both_widths

YAML = {"Content-Type": "application/yaml"}
N8N = ROOT / "tests" / "formats" / "corpus" / "n8n" / "ask_a_human.json"
VERSION = "version: 1\nid: diffme\nname: {name}\nblocks:\n  - id: hello\n    type: set\n" \
          "    with: {{text: hi}}\n"


async def test_import_a_file_download_the_yaml_and_compare_two_versions(web, page, tmp_path):
    async with web.client("alice") as alice:
        for name in ("First", "Second"):
            saved = await alice.put("/api/workflows/diffme", content=VERSION.format(name=name),
                                    headers=YAML)
            assert saved.status_code in (200, 201), saved.text
    await sign_in(page, web)
    await page.get_by_label("Import from another tool (Dify, n8n, ...)").set_input_files(str(N8N))
    refusal = page.get_by_role("alert")
    await expect(refusal).to_contain_text("have no flowforge counterpart")
    await page.get_by_role("button", name="Import anyway").click()
    await page.wait_for_url("**/new-workflow")
    report = page.get_by_role("region", name="Import report")
    await expect(report).to_contain_text("ask_a_human.json")
    await expect(report).to_contain_text("n8n")
    await expect(page.get_by_role("status").filter(has_text="Unsaved changes")).to_be_visible()
    text = await editor_text(page)
    assert text.startswith("version: 1\nid: ask_a_human\n")
    await shot(page, "files-01-imported")
    await axe_at_both_widths(page)

    async with page.expect_download() as download:
        await page.get_by_role("button", name="Download YAML").click()
    got = await download.value
    assert got.suggested_filename == "ask_a_human.yaml"
    path = Path(tmp_path / "got.yaml")
    await got.save_as(path)
    async with web.client("alice") as alice:            # the import's YAML, as the editor has it
        answer = await alice.post("/api/import", json={"filename": N8N.name,
                                                       "text": N8N.read_text(), "partial": True})
    assert path.read_text() == answer.json()["yaml"]

    page.on("dialog", lambda dialog: dialog.accept())         # leave the unsaved import
    await page.goto(web.url + "/workflows/diffme")
    await page.get_by_text("Compare versions").click()
    changes = page.get_by_label("Changes from version 1 to version 2")
    await expect(changes.locator("del")).to_have_text(["- name: First\n"])
    await expect(changes.locator("ins")).to_have_text(["+ name: Second\n"])
    await page.get_by_label("From version", exact=True).select_option("2")
    await expect(page.get_by_text("The two versions have the same text.")).to_be_visible()
    await page.get_by_label("From version", exact=True).select_option("1")
    await shot(page, "files-02-diff")
    await axe_at_both_widths(page)
