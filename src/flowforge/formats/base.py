"""The one interface every foreign format meets: data in, a document and a report out.

People arrive with workflows built elsewhere (Dify, n8n, Langflow, Flowise,
Sim, AgentFlow's Pipeline JSON, prompt-chain Agent JSON).  Each format is
one module of this package holding one `Format`; loading, `flowforge
import`, the server's import route and the web app all ask the room
(`flowforge.formats.room`) rather than a converter by name, so a new format
is one module and one line in the room's list.

A conversion never drops anything silently: every foreign node gets a
`NodeReport` saying what it became, or that it has no counterpart and what to
do instead, and every setting left behind is listed on its node.  Whether a
document with unsupported nodes is written at all is the room's decision
(refused unless the user asks for a partial import), not the converter's:
a converter always returns its best document, in which a node without a
counterpart is an `unsupported` block that fails clearly if a run reaches it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from flowforge.errors import FlowforgeError

__all__ = ["Format", "Imported", "ImportReport", "NodeReport", "FormatError", "ImportRefused",
           "ExportRefused"]


@dataclass
class NodeReport:
    """What one foreign node became.  `became` is the flowforge block type
    (`llm`, `loop`, ...) or None when the node has no counterpart; then
    `instead` says what the user can do.  `dropped` lists each setting left
    behind, as `name: why`."""

    id: str
    title: str
    type: str
    became: str | None
    instead: str = ""
    dropped: list[str] = field(default_factory=list)

    @property
    def supported(self) -> bool:
        return self.became is not None

    def line(self) -> str:
        name = f"{self.title!r} ({self.id}, {self.type})" if self.title and self.title != self.id \
            else f"{self.id} ({self.type})"
        if self.became is None:
            text = f"  ✗ {name}: no counterpart"
            if self.instead:
                text += f"; {self.instead}"
        else:
            text = f"  ✓ {name} -> {self.became}"
        return "\n".join([text, *(f"      dropped {item}" for item in self.dropped)])

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "type": self.type, "became": self.became,
                "instead": self.instead, "dropped": list(self.dropped)}


@dataclass
class ImportReport:
    """Everything the user must know about one conversion: per node what it
    became, the knowledge bases to create (foreign files carry no documents),
    and notes (expressions that did not map, settings of the whole flow)."""

    format: str
    nodes: list[NodeReport] = field(default_factory=list)
    knowledge_bases: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def unsupported(self) -> list[NodeReport]:
        return [node for node in self.nodes if not node.supported]

    def lines(self) -> list[str]:
        done = sum(node.supported for node in self.nodes)
        out = [f"{self.format}: {done} of {len(self.nodes)} node(s) converted"]
        out += [node.line() for node in self.nodes]
        if self.knowledge_bases:
            out.append("knowledge bases to create (the file carries no documents): "
                       + ", ".join(self.knowledge_bases))
        out += [f"note: {note}" for note in self.notes]
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"format": self.format, "nodes": [node.as_dict() for node in self.nodes],
                "knowledge_bases": list(self.knowledge_bases), "notes": list(self.notes),
                "unsupported": [node.id for node in self.unsupported]}


@dataclass
class Imported:
    """A converted document (plain data, as `load` takes it) and its report."""

    document: dict[str, Any]
    report: ImportReport


@runtime_checkable
class Format(Protocol):
    """One foreign format.  `detect` looks at parsed data only (cheap, no
    exceptions); `convert` raises FormatError for a file of this format that
    is broken (a node without a type), naming the place."""

    name: str          # the short name: `dify`, `n8n`, ... (`--format`, reports)
    title: str         # what users call it: "Dify DSL"

    def detect(self, data: Any) -> bool: ...

    def convert(self, data: Any, *, source: str) -> Imported: ...


class FormatError(FlowforgeError):
    """A foreign file that cannot be read as its format: says what and where."""

    def __init__(self, message: str, where: str = "", source: str | None = None):
        self.where = where
        self.source = source
        self.message = message
        text = f"{where}: {message}" if where else message
        super().__init__(f"{source}: {text}" if source else text)


class ImportRefused(FlowforgeError):
    """Some nodes have no counterpart and no partial import was asked for."""

    def __init__(self, imported: Imported, source: str | None = None):
        self.imported = imported
        self.source = source
        missing = imported.report.unsupported
        head = (f"{len(missing)} node(s) of this {imported.report.format} file have no flowforge "
                f"counterpart; nothing was written (pass --partial to import the rest: those "
                f"nodes stay in the document and fail clearly if a run reaches them)")
        body = "\n".join(node.line() for node in missing)
        super().__init__(f"{source}: {head}:\n{body}" if source else f"{head}:\n{body}")


class ExportRefused(FlowforgeError):
    """A document that cannot be written in another format as it is: each
    problem names the block (or the document's setting) and what to do."""

    def __init__(self, format: str, problems: list[str]):
        self.format = format
        self.problems = list(problems)
        head = (f"this document cannot be exported to {format} ({len(problems)} problem(s)); "
                f"nothing was written")
        super().__init__("\n".join([f"{head}:", *(f"  ✗ {line}" for line in problems)]))
