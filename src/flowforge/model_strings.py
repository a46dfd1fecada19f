"""Model strings, read in one place: `provider/model`, and for servers that
speak OpenAI's API `openai-compatible/<server>/<model>`.

Policy checks, key look-ups, pricing, tracing, the providers themselves and
the format exporters all need the same three parts of `openai/gpt-4o` or
`openai-compatible/ollama/llama3.1`.  Each used to split the text itself, and
each split could drift from the others (what a bare name is, where a server
ends).  It sits in the foundation so that the workflow layer's policy and the
providers above it read model strings the same way.  Whether the provider
exists is not decided here: that is the provider table's business
(`flowforge.providers.registry`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ModelString", "parse_model", "COMPATIBLE"]

#: The provider whose model names start with the server's name.
COMPATIBLE = "openai-compatible"


@dataclass(frozen=True)
class ModelString:
    """The parts of one model string; a text without `/` has no provider."""

    text: str
    provider: str
    """What comes before the first `/` (`openai`), or "" for a bare name."""
    name: str
    """What comes after it (`gpt-4o`, `ollama/llama3.1`), or "" for a bare name."""

    @property
    def server(self) -> str:
        """The server of an `openai-compatible/<server>/<model>` string, else ""."""
        return self.name.partition("/")[0] if self.provider == COMPATIBLE else ""

    @property
    def served_name(self) -> str:
        """What the provider's API is asked for: the name after the server for
        an OpenAI-compatible server, else the name."""
        if self.provider == COMPATIBLE:
            return self.name.partition("/")[2]
        return self.name


def parse_model(text: str) -> ModelString:
    """`openai/gpt-4o` -> ModelString(provider="openai", name="gpt-4o"); never
    raises (a bare `gpt-4o` has provider "" and name "")."""
    provider, slash, name = text.partition("/")
    if not slash:
        return ModelString(text, "", "")
    return ModelString(text, provider, name)
