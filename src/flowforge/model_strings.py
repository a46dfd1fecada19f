"""Model strings, read in one place: `provider/model`, and for servers that
speak OpenAI's API `openai-compatible/<server>/<model>`.

Policy checks, key look-ups, pricing, tracing, the providers themselves and
the format exporters all need the same three parts of `openai/gpt-4o` or
`openai-compatible/ollama/llama3.1`.  Each used to split the text itself, and
each split could drift from the others (what a bare name is, where a server
ends).  It sits in the foundation so that the workflow layer's policy and the
providers above it read model strings the same way.  Bare names of
well-known families (`gpt-4o`, `claude-...`, `llama3.1`) are read with their
provider here too (`qualified`), wherever they come from: a document (see
`workflow.model_names`), `--model`, or a template resolved at run time.
Whether the provider exists is not decided here: that is the provider
table's business (`flowforge.providers.resolve`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from flowforge.hints import closest

__all__ = ["ModelString", "parse_model", "COMPATIBLE", "FAMILIES", "qualified",
           "closest_known"]

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


#: (how a family's names start, the provider prefix they are read with)
FAMILIES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?:gpt-|chatgpt-|o[134](?:-|$))"), "openai"),
    (re.compile(r"claude-"), "anthropic"),
    (re.compile(r"gemini-"), "google"),
    # open-weights families as Ollama names them (`llama3.1:8b`, `qwen2.5`)
    (re.compile(r"(?:llama\d|codellama|mistral|mixtral|qwen\d|qwq|phi\d|gemma\d|"
                r"deepseek-r1|deepseek-coder|smollm|tinyllama|granite\d)"),
     "openai-compatible/ollama"),
)

#: Well-known names, for the did-you-mean of a bare name of no known family.
_KNOWN = ("gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "o3-mini", "o4-mini",
          "claude-sonnet-4-5", "claude-3-5-sonnet-latest", "claude-3-5-haiku-latest",
          "gemini-2.5-flash", "gemini-2.5-pro", "gemini-1.5-pro", "llama3.1", "llama3.2",
          "qwen2.5", "mistral", "gemma2", "phi3")


def qualified(model: Any) -> str | None:
    """`gpt-4o` -> `openai/gpt-4o`; None for a string that names its provider,
    a templated one, or a name of no known family."""
    if not isinstance(model, str) or "/" in model or "{{" in model or not model:
        return None
    for pattern, provider in FAMILIES:
        if pattern.match(model.lower()):
            return f"{provider}/{model}"
    return None


def closest_known(model: str) -> str | None:
    """The qualified well-known name closest to a bare `model`, or None."""
    close = closest(model.lower(), _KNOWN)
    return qualified(close) if close else None
