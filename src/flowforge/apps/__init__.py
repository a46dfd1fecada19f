"""Applications built on the one engine: each is shipped workflow files plus
thin code that feeds them and keeps what they need between runs.

    flowforge.apps.chat       the tool-based RAG chat (`flowforge chat`, /api/chat)
"""

__all__: list[str] = []
