"""Browser tests of the web app: a real server on loopback (tests/server's
`start_server`) and Debian's Chromium driven by Playwright, headless.  Nothing
is downloaded: Playwright launches /usr/bin/chromium-headless-shell
(scripts/install_system_deps.sh installs it): Chromium's headless shell, the
same Blink without the full browser around it, which is what Playwright itself
runs for headless Chromium; these tests take ~25 % less CPU in it than in the
full browser's headless mode (bench/RESULTS.md).  With FLOWFORGE_SCREENSHOTS=1
each test writes screenshots to tests/webapp/screenshots/ for a reviewer to
look at (`FLOWFORGE_SCREENSHOTS=1 .venv/bin/python -m pytest tests/webapp`);
they assert nothing, and the 41 full pages cost a run of the suite ~6 s of CPU.

One browser serves every test of a pytest worker: each test started
Playwright's driver (a Node.js process, ~1.4 s of CPU) and Chromium (~0.7 s);
now each worker does it once (the suite's CPU fell by ~10 s: most of what a
browser test costs is Chromium drawing).  Each test still gets a browser
context of its own (cookies, storage, cache), so no state passes between tests.  The
shared browser lives in the worker's session event loop, so the tests here
and their async fixtures run in that loop (`SESSION_LOOP`, and the hook
below that marks this folder's tests)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from tests.server.conftest import start_server

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
#: How many blocks the shipped support demo draws (a page that opens it waits for them all).
SUPPORT_BLOCKS = len(yaml.safe_load((EXAMPLES / "support.yaml").read_text())["blocks"])
SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"
CHROMIUM = "/usr/bin/chromium-headless-shell"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-quic", "--disable-dev-shm-usage"]

#: the loop of this folder's async tests and fixtures: the shared browser's
SESSION_LOOP = "session"


def pytest_collection_modifyitems(items):
    """Run this folder's async tests in the worker's session loop (the hook
    sees the whole run's items: only those under tests/webapp are marked)."""
    here = Path(__file__).resolve().parent
    marker = pytest.mark.asyncio(loop_scope=SESSION_LOOP)
    for item in items:
        if here in Path(str(item.path)).parents and item.get_closest_marker("asyncio"):
            item.add_marker(marker, append=False)   # before auto mode's own


@pytest_asyncio.fixture(loop_scope=SESSION_LOOP)
async def web(tmp_path, monkeypatch):
    """The server of the support demo: the scripted model, files under examples/,
    alice granted `server_files` (the knowledge block reads examples/policies)."""
    monkeypatch.setenv("FLOWFORGE_SECRET_KEY_FILE", str(tmp_path / "secret.key"))
    monkeypatch.setenv("FLOWFORGE_KNOWLEDGE_URL", f"sqlite:///{tmp_path / 'kb.db'}")
    live, stop = await start_server(
        f"sqlite:///{tmp_path / 'server.db'}", files_root=str(EXAMPLES),
        model=f"scripted/{EXAMPLES / 'scripted' / 'support.rules.yaml'}",
        max_body_bytes=1024 * 1024)
    async with live.client("admin") as admin:
        answer = await admin.post("/api/users/alice/grants", json={"capability": "server_files"})
        assert answer.status_code == 201, answer.text
    yield live
    await stop()


@pytest_asyncio.fixture(scope="session", loop_scope=SESSION_LOOP)
async def browser():
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        chromium = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                                    args=CHROMIUM_ARGS)
        yield chromium
        await chromium.close()


@pytest_asyncio.fixture(loop_scope=SESSION_LOOP)
async def page(browser):
    # The tests read the page with scripts of their own (wait_for_function, axe-core),
    # which the app's Content-Security-Policy refuses; test_csp.py runs the app under it.
    context = await browser.new_context(viewport={"width": 1500, "height": 1000},
                                        bypass_csp=True)
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    # 30 s, as the narrow and dark-mode pages use: with the whole suite on two
    # cores an editor step took over 15 s (the same test alone takes 3 s)
    page.set_default_timeout(30_000)
    yield page
    await context.close()
    assert not errors, f"the page threw: {errors}"


async def shot(page: Any, name: str) -> None:
    """The whole page as tests/webapp/screenshots/NAME.png, if FLOWFORGE_SCREENSHOTS=1."""
    if os.environ.get("FLOWFORGE_SCREENSHOTS", "") != "1":
        return
    SCREENSHOTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


async def sign_in(page: Any, live: Any, who: str = "alice", at: str = "/") -> None:
    """Open the page at `at` signed out, sign in on the form the app sends it
    to, and land back on `at` (the form's `next`), as a person following a
    link does.  A test that signed in on the workflow list and then loaded
    its own page paid for the app and the list twice (~0.4 s of CPU)."""
    await page.goto(live.url + at)
    await page.wait_for_url("**/signin**")
    await page.get_by_label("API key").fill(live.keys[who])
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_url(live.url + at)
    if at == "/":
        await page.get_by_role("heading", name="Workflows").wait_for()
    await page.get_by_text(f"Signed in as {who}").wait_for()


def drawn_blocks(source: str) -> int:
    """How many blocks the canvas draws for `source` (children of loops and maps too)."""
    def count(blocks: list[dict[str, Any]] | None) -> int:
        return sum(1 + count(block.get("blocks")) for block in blocks or [])
    return count(yaml.safe_load(source)["blocks"])


async def open_saved(page: Any, web: Any, source: str) -> None:
    """Save `source` as alice's workflow, sign in and open it in the editor;
    back once every block is drawn and the server's check found no problem."""
    async with web.client("alice") as alice:
        saved = await alice.post("/api/workflows", content=source,
                                 headers={"Content-Type": "application/yaml"})
        assert saved.status_code == 201, saved.text
    await sign_in(page, web, at=f"/workflows/{yaml.safe_load(source)['id']}")
    await page.wait_for_function(
        f"document.querySelectorAll('[data-block-id]').length === {drawn_blocks(source)}")
    await page.get_by_text("No problems: the document is valid.").wait_for()
