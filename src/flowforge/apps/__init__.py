"""Applications built on the one engine: shipped workflow files and the
little code that is theirs alone; `flowforge.service` runs them.

    flowforge.apps.chat       the tool-based RAG chat (run by `service.chat`)
    flowforge.apps.chains     prompt-chain Agents: imported to workflows, exported back
"""

__all__: list[str] = []
