"""MkDocs hook: list every generated block page in the navigation under
"Block types", so the sidebar follows the block registry without a
hand-kept list (docs/gen_reference.py has written the pages by then)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

INDEX = "reference/blocks/index.md"


def on_config(config: Any) -> Any:
    folder = Path(config.docs_dir) / "reference" / "blocks"
    pages = [{path.stem: f"reference/blocks/{path.name}"}
             for path in sorted(folder.glob("*.md")) if path.stem != "index"]

    def expand(items: list) -> None:
        for position, item in enumerate(items):
            if isinstance(item, dict):
                (title, value), = item.items()
                if value == INDEX:
                    items[position] = {title: [INDEX, *pages]}
                elif isinstance(value, list):
                    expand(value)

    expand(config.nav or [])
    return config
