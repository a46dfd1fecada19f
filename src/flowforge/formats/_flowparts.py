"""What the Langflow and Flowise converters share: both editors are built on
LangChain, so their prompts are LangChain `{var}` templates, their chat-model
components name a vendor, and their agents take the same stock tools.

Prompt text is turned into flowforge shapes here once: a Jinja2 `template`
block (Langflow's Prompt component, a block of its own) or an `llm` block's
`{placeholder}` prompt with `inputs` (Flowise's prompt nodes, folded into
their chain).  Literal text never becomes a template: LangChain's escaped
braces (`{{`, `}}`) come out as the single braces they meant.
"""

from __future__ import annotations

import html
import re
from typing import Any

from flowforge.formats._flowgraph import model_string

__all__ = ["prompt_vars", "jinja_prompt", "llm_prompt", "chat_model", "model_fields", "number",
           "search_tool", "calculator_tool", "SEARCH_TOOLS", "CALCULATOR_SOURCE", "html_text",
           "GENERIC_INSTEAD"]

#: LangChain's f-string template: `{{` and `}}` are literal braces, `{name}` a variable
_TOKEN = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")

GENERIC_INSTEAD = ("rebuild what it does with an inline Python `code` block, a registered "
                   "function (`function` block) or an `http` block against the service's API")


def prompt_vars(text: str) -> list[str]:
    """The variables of a LangChain template, in order, once each."""
    return list(dict.fromkeys(m.group(1) for m in _TOKEN.finditer(text or "") if m.group(1)))


def _pieces(text: str) -> list[tuple[str, str]]:
    """("text", literal) and ("var", name) pieces, escaped braces unescaped."""
    out: list[tuple[str, str]] = []
    last = 0
    for match in _TOKEN.finditer(text):
        literal = text[last:match.start()]
        if match.group(1):
            out += [("text", literal), ("var", match.group(1))]
        else:
            out.append(("text", literal + match.group(0)[0]))
        last = match.end()
    out.append(("text", text[last:]))
    merged: list[tuple[str, str]] = []
    for kind, value in out:
        if kind == "text" and merged and merged[-1][0] == "text":
            merged[-1] = ("text", merged[-1][1] + value)
        elif kind == "var" or value:
            merged.append((kind, value))
    return merged


def _raw(text: str) -> str:
    """Literal text inside a Jinja2 template (braces never read as Jinja)."""
    return f"{{% raw %}}{text}{{% endraw %}}" if "{" in text or "}" in text else text


def jinja_prompt(text: str, references: dict[str, str], literals: dict[str, str]
                 ) -> tuple[str, dict[str, str]]:
    """A LangChain template as a Jinja2 template and its `variables`: a
    variable wired to a node reads that node (`references`: name ->
    `{{block.field}}`), a variable typed into the editor is written into
    the template as text (`literals`), any other renders empty."""
    parts, variables = [], {}
    for kind, value in _pieces(text or ""):
        if kind == "text":
            parts.append(_raw(value))
        elif value in references:
            parts.append("{{ " + value + " }}")
            variables[value] = references[value]
        else:
            parts.append(_raw(str(literals.get(value) or "")))
    return "".join(parts), variables


def llm_prompt(text: str, values: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A LangChain template as an `llm` block's `prompt` and `inputs`: each
    variable stays a `{placeholder}` filled from `values` (a reference or
    text).  A template whose escaped braces would read as placeholders is
    passed whole through one `{prompt}` input instead."""
    pieces = _pieces(text or "")
    literal = "".join(value for kind, value in pieces if kind == "text")
    if "{{" in (text or "") or "}}" in (text or "") or "{{" in literal:
        joined = "".join(value if kind == "text" else str(values.get(value, ""))
                         for kind, value in pieces)
        return "{prompt}", {"prompt": joined}
    names = [value for kind, value in pieces if kind == "var"]
    return text, {name: values.get(name, "") for name in dict.fromkeys(names)}


#: vendor words of chat-model components -> the vendor names `model_string` knows
_VENDORS = {"googlegenerativeai": "google", "vertexai": "vertex", "mistralai": "mistral",
            "azurechatopenai": "azure", "azureopenai": "azure", "chatopenaicustom": "openai",
            "chatlocalai": "openai-compatible", "openaicompatible": "openai-compatible",
            "chatopenrouter": "openrouter", "deepseekchat": "deepseek", "xai": "xai",
            "amazonbedrock": "bedrock", "huggingface": "huggingface"}


def chat_model(vendor_word: str, model: Any) -> tuple[str | None, str]:
    """(flowforge model string or None, the vendor as read) for a component
    such as `OpenAIModel`, `chatAnthropic`, `groqChat`."""
    word = re.sub(r"[^a-z]", "", vendor_word.lower())
    word = _VENDORS.get(word, word)
    for affix in ("model", "component", "chat"):
        word = word.removesuffix(affix)
    word = word.removeprefix("chat")
    vendor = _VENDORS.get(word, word)
    return model_string(vendor, str(model) if model else None), vendor


def model_fields(vendor_word: str, name: Any, temperature: Any, max_tokens: Any,
                 base_url: Any) -> tuple[dict[str, Any], list[str]]:
    """A chat model component's `model`, `temperature` and `max_tokens` as an
    LLM block's fields, and what was dropped (a model of no known provider, a
    custom base URL), however the editor names them."""
    found: dict[str, Any] = {}
    dropped: list[str] = []
    written, vendor = chat_model(vendor_word, name)
    if written:
        found["model"] = written
    else:
        dropped.append(f"model {name!r} of {vendor!r}: flowforge has no provider for it; the "
                       f"block uses the default model until `model:` is set")
    temperature = number(temperature)
    if temperature is not None:
        found["temperature"] = temperature
    tokens = number(max_tokens)
    if isinstance(tokens, int) and tokens > 0:
        found["max_tokens"] = tokens
    if base_url:
        dropped.append("base URL: use an `openai-compatible/<name>` model with its base URL")
    return found, dropped


def number(value: Any) -> float | int | None:
    """A number the editors often store as text (`"0.9"`, `"1000"`)."""
    if isinstance(value, bool) or value in (None, ""):
        return None
    if isinstance(value, (int, float)):
        return value
    try:
        text = str(value).strip()
        return int(text) if re.fullmatch(r"-?\d+", text) else float(text)
    except ValueError:
        return None


#: web search components of both editors (lower case, letters only)
SEARCH_TOOLS = {"searchapi", "serpapi", "serper", "googlesearchapi", "googlesearchapicore",
                "googlecustomsearch", "googleserperapi", "bingsearchapi", "bravesearchapi",
                "duckduckgosearch", "duckduckgosearchcomponent", "tavilysearch",
                "tavilysearchcomponent", "tavilyapi", "searxng", "searchapicomponent",
                "exasearch", "websearch", "websearchcomponent"}


def search_tool(kind: str) -> tuple[dict[str, Any], list[str]]:
    """The `web_search` tool standing for a vendor's search component."""
    return {"web_search": {}}, [f"{kind}: flowforge searches with its own back ends "
                                f"(`offline`, `perplexity`, `tavily`); set "
                                f"`web_search.backend` and its key"]


#: A calculator for agents, run in the sandbox as an inline `code` tool:
#: + - * / // % ** ^, parentheses, and math's functions and constants.
CALCULATOR_SOURCE = '''\
import math
import re

NAMES = {"sqrt": math.sqrt, "sin": math.sin, "cos": math.cos, "tan": math.tan,
         "log": math.log, "log10": math.log10, "exp": math.exp, "floor": math.floor,
         "ceil": math.ceil, "abs": abs, "round": round, "pi": math.pi, "e": math.e}


def main(expression: str) -> dict:
    tokens = re.findall(r"\\d+\\.?\\d*(?:[eE][-+]?\\d+)?|\\.\\d+|\\*\\*|//|[-+*/%^(),]|[A-Za-z]\\w*",
                        expression)
    if "".join(tokens) != re.sub(r"\\s+", "", expression):
        return {"error": "only numbers, + - * / // % ** ^, parentheses and math functions"}
    position = [0]

    def peek():
        return tokens[position[0]] if position[0] < len(tokens) else ""

    def take():
        if position[0] >= len(tokens):
            raise ValueError("the expression ends too early")
        position[0] += 1
        return tokens[position[0] - 1]

    def atom():
        token = take()
        if token == "(":
            value = sum_()
            take()
            return value
        if token == "-":
            return -power()
        if token == "+":
            return power()
        if token[0].isalpha():
            if token not in NAMES:
                raise ValueError("unknown name " + token)
            found = NAMES[token]
            if peek() != "(":
                return found
            take()
            args = [sum_()]
            while peek() == ",":
                take()
                args.append(sum_())
            take()
            return found(*args)
        return float(token) if "." in token or "e" in token.lower() else int(token)

    def power():
        value = atom()
        if peek() in ("**", "^"):
            take()
            return value ** power()
        return value

    def product():
        value = power()
        while peek() in ("*", "/", "//", "%"):
            operator = take()
            right = power()
            value = value * right if operator == "*" else value / right if operator == "/" \\
                else value // right if operator == "//" else value % right
        return value

    def sum_():
        value = product()
        while peek() in ("+", "-"):
            value = value + product() if take() == "+" else value - product()
        return value

    try:
        result = sum_()
        if position[0] != len(tokens):
            return {"error": "unexpected " + peek()}
    except (ValueError, ZeroDivisionError, OverflowError, IndexError, TypeError) as exc:
        return {"error": str(exc) or "not an expression"}
    return {"result": result}
'''


def calculator_tool() -> dict[str, Any]:
    """LangChain's calculator as an agent tool: the sandboxed `code` block
    above, the model giving the expression."""
    return {"block": {"type": "code", "with": {"language": "python",
                                               "source": CALCULATOR_SOURCE}},
            "name": "calculator",
            "description": "Useful for getting the result of a math expression, e.g. "
                           "(2 + 3) * 4 or sqrt(16). The input is the expression.",
            "parameters": {"type": "object", "required": ["inputs"], "properties": {
                "inputs": {"type": "object", "required": ["expression"], "properties": {
                    "expression": {"type": "string", "description": "The math expression"}}}}}}


_TAG = re.compile(r"<[^>]+>")


def html_text(text: Any) -> str:
    """Flowise agentflow messages are HTML from a rich-text editor: the text
    they show, one line per paragraph."""
    if not isinstance(text, str):
        return ""
    text = re.sub(r"</p>\s*<p>|<br\s*/?>|</p>", "\n", text)
    lines = html.unescape(_TAG.sub("", text)).split("\n")
    return "\n".join(line.strip() for line in lines).strip()
