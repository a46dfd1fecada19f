"""Applications built on the one engine: shipped workflow files and the
little code that is theirs alone; `flowforge.service` runs them.  An
application never imports the service (the layer above it): what needs the
store or a run (`start_run`, `load`) is the service's thin module of the same
name, and everything else of the application is here.

    flowforge.apps.chat       the tool-based RAG chat (run by `service.chat`)
    flowforge.apps.research   the iterative research orchestrator (run by `service.research`)
    flowforge.apps.chains     prompt-chain Agents: imported to workflows, exported back
    flowforge.apps.thinker    intent -> Pipeline JSON: clarifier, decompose, match, create, wire
"""

from functools import lru_cache
from pathlib import Path

import yaml

__all__ = ["shipped_workflows"]


@lru_cache(maxsize=1)
def shipped_workflows() -> dict[str, Path]:
    """Each shipped workflow file by its document's `id` (`rag-chat`, `research`,
    `research-question`, ...): what a run of an application ran, for the web
    app to show (its runs name the id, and no user stored it)."""
    found: dict[str, Path] = {}
    for path in sorted(Path(__file__).parent.glob("*/*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and isinstance(data.get("id"), str):
            found[data["id"]] = path
    return found
