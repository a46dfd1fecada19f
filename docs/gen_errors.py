"""The errors and environment pages: the error tree as the code draws it, the
troubleshooting entries each error points to, and every `FLOWFORGE_*` and
provider variable the source reads."""

from __future__ import annotations

import re
from pathlib import Path

from gen_common import ROOT, SOURCE, cell, dedent_doc, docstring_markdown, shipped_block_types

__all__ = ["ENV_PATTERN", "errors_page", "environment_page", "tree_classes",
           "troubleshooting_entries"]

#: What counts as an environment variable the code reads.
ENV_PATTERN = re.compile(
    r"\b(FLOWFORGE_[A-Z0-9_]*[A-Z0-9]|OPENAI_COMPATIBLE_<NAME>_[A-Z_]+|"
    r"(?:OPENAI|ANTHROPIC|GOOGLE|GEMINI|REPLICATE|TAVILY|BRAVE|PERPLEXITY|OPENROUTER)"
    r"_[A-Z_]*[A-Z])\b")



def tree_classes(doc: str) -> list[tuple[str, str, str, str]]:
    """(class, base, module, meaning) of each class the error tree draws with
    its module in [brackets]: the ones that live beside the code raising them."""
    found, parents = [], {}
    for line in doc.splitlines():
        match = re.match(r"\s*([│ ]*)[├└]── (\w+)\s+(?:\[([^\]]+)\]\s*)?(.*)", line)
        if not match:
            continue
        depth = len(match.group(1)) // 4 + 1
        parents[depth] = match.group(2)
        if match.group(3):
            found.append((match.group(2), parents.get(depth - 1, "FlowforgeError"),
                          match.group(3), match.group(4)))
    return found


def troubleshooting_entries() -> dict[str, list[tuple[str, str]]]:
    """Error class -> the troubleshooting entries (title, anchor) whose
    `**Error:**` line names it."""
    from markdown.extensions.toc import slugify

    page = (ROOT / "docs" / "guides" / "troubleshooting.md").read_text(encoding="utf-8")
    entries: dict[str, list[tuple[str, str]]] = {}
    for section in re.split(r"(?m)^## ", page)[1:]:
        title = section.splitlines()[0].strip()
        slug = slugify(re.sub(r"[`*]", "", title), "-")
        for line in re.findall(r"(?m)^\*\*Error:\*\*.*$", section):
            for name in re.findall(r"\[`(\w+)`\]", line):
                entries.setdefault(name, []).append((title, slug))
    return entries


def errors_page(out: Path) -> list[str]:
    import flowforge.errors as errors
    from flowforge.server import errors as server_errors

    fixes = troubleshooting_entries()
    lines = ["# Errors", "", docstring_markdown(dedent_doc(errors)), "",
             "## Error classes", "",
             "Each class, and where [troubleshooting](../guides/troubleshooting.md) shows it "
             "happening and how to fix it.", "",
             "| class | base | meaning | troubleshooting |", "| --- | --- | --- | --- |"]

    def seen(name: str) -> str:
        return ", ".join(f"[{cell(title)}](../guides/troubleshooting.md#{slug})"
                         for title, slug in fixes.get(name, []))

    names = []
    for name in errors.__all__:
        obj = getattr(errors, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            names.append(name)
            lines.append(f"| <a id=\"{name}\"></a>`{name}` | `{obj.__mro__[1].__name__}` | "
                         f"{cell(dedent_doc(obj).split(chr(10) * 2)[0])} | {seen(name)} |")
    for name, base, where, meaning in tree_classes(dedent_doc(errors)):
        if name not in names:                    # beside the code that raises it
            names.append(name)
            lines.append(f"| <a id=\"{name}\"></a>`{name}` | `{base}` | {cell(meaning)} "
                         f"(`{where}`) | {seen(name)} |")
    from gen_block_errors import by_type_section

    lines += ["", *by_type_section(shipped_block_types())]
    lines += ["", "## HTTP error codes", "", docstring_markdown(dedent_doc(server_errors)),
              "", "| status | `code` |", "| --- | --- |"]
    lines += [f"| {status} | `{code}` |" for status, code in sorted(server_errors._CODES.items())]
    found: dict[str, set[str]] = {}
    for folder in ("server", "service"):
        for path in sorted((SOURCE / folder).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            for code in re.findall(r"(?:\bcode=|_json\(\d+,\s*[^,()]+,\s*)[\"']([a-z_]+)[\"']",
                                   text):
                if code not in server_errors._CODES.values():
                    found.setdefault(code, set()).add(
                        ".".join(path.relative_to(SOURCE.parent).with_suffix("").parts))
    lines += ["", "More specific codes, found in the server's source:", "",
              "| `code` | raised in |", "| --- | --- |"]
    lines += [f"| `{code}` | {', '.join(f'`{m}`' for m in sorted(modules))} |"
              for code, modules in sorted(found.items())]
    from flowforge.cli import exits, main

    lines += ["", "## Exit codes of the command line", "",
              docstring_markdown(dedent_doc(exits), "text"), "",
              dedent_doc(main).split("\n\n", 1)[1]]
    (out / "errors.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return names


def environment_page(out: Path) -> list[str]:
    """Every variable the source reads, with the modules that read it."""
    readers: dict[str, set[str]] = {}
    context: dict[str, str] = {}
    for path in sorted(SOURCE.rglob("*.py")):
        module = ".".join(path.relative_to(SOURCE.parent).with_suffix("").parts)
        for line in path.read_text(encoding="utf-8").splitlines():
            for match in ENV_PATTERN.finditer(line):
                name = match.group(1)
                readers.setdefault(name, set()).add(module)
                prose = line.strip().lstrip("#:").strip().strip("\"'(),; ").rstrip('"')
                if name not in context and not re.search(r"environ|getenv|[(\[]\"|= \"",
                                                         line) and len(prose.split()) > 4:
                    context[name] = prose
    lines = ["# Environment variables", "",
             "Every environment variable the source reads, found in the source when the "
             "manual is built, with the modules that read it and a line of the code's own "
             "documentation that names it. `OPENAI_COMPATIBLE_<NAME>_BASE_URL` and "
             "`..._API_KEY` configure `openai-compatible/<name>` models; the standard "
             "`OTEL_*` variables configure [tracing](../guides/tracing.md).", "",
             "| variable | read in | from the code's documentation |", "| --- | --- | --- |"]
    for name, modules in sorted(readers.items()):
        lines.append(f"| `{name}` | {', '.join(f'`{m}`' for m in sorted(modules))} | "
                     f"{cell(context.get(name, ''))} |")
    (out / "environment.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return sorted(readers)
