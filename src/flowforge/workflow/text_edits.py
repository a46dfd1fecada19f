"""Small edits to a workflow's text that change only the lines they touch.

An editor (the canvas, a block's form) changes one field, one block or one
`after:` entry at a time; the author's comments, key order, quoting and
layout must survive.  An edit is applied to a round-trip parse of the text
(ruamel.yaml for YAML, the stdlib for JSON), the result is dumped, and only
the lines that dump changed are spliced into the original text: a line no
edit touched stays byte for byte as the author wrote it, even where the
dumper would have written it differently (a flow mapping folded over two
lines, an odd indent).  An edit inside such a region rewrites the region
whole, in the dumper's style: a JSON document laid out unlike
`json.dumps(indent=n)` (objects kept on one line) is one such region.

Block positions on the canvas live in the document itself, under
`metadata: {layout: {<block id>: {x: 120, y: 40}}}`: the engine ignores
`metadata`, and a position travels with the document (export, versions).
"""

from __future__ import annotations

import difflib
import io
import json
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from flowforge.errors import WorkflowError

__all__ = ["Edit", "SetField", "UnsetField", "AddBlock", "RemoveBlock", "AddAfter",
           "RemoveAfter", "MoveBlock", "apply_edits"]

_PATH = r"^[A-Za-z_][A-Za-z0-9_\-]*(\.[A-Za-z_][A-Za-z0-9_\-]*)*$"


class _Edit(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class SetField(_Edit):
    """Set one field of a block, e.g. `{op: set, block: answer, path: with.prompt, value: ...}`."""

    op: Literal["set"]
    block: str
    """The id of the block to change (children of containers included)."""
    path: str = Field(pattern=_PATH, max_length=500)
    """Dotted keys inside the block: `with.prompt`, `name`, `with.filters.category`;
    missing mappings on the way are created."""
    value: Any
    """The new value (any JSON value)."""


class UnsetField(_Edit):
    """Remove one field of a block (`with.top_k`); nothing happens when it is absent."""

    op: Literal["unset"]
    block: str
    """The id of the block to change."""
    path: str = Field(pattern=_PATH, max_length=500)
    """Dotted keys inside the block."""


class AddBlock(_Edit):
    """Add a block at the end of the document's (or a container's) `blocks:`."""

    op: Literal["add_block"]
    spec: dict[str, Any]
    """The new block as written in a document: `{id: notify, type: response, with: {...}}`."""
    parent: str | None = None
    """Add it inside this container block (loop, parallel) instead of at the top."""


class RemoveBlock(_Edit):
    """Remove a block (and its position on the canvas); blocks that still refer
    to it make the edit refused, with the places named."""

    op: Literal["remove_block"]
    block: str
    """The id of the block to remove."""


class AddAfter(_Edit):
    """Add a control-only dependency: `block` waits for `after`."""

    op: Literal["add_after"]
    block: str
    """The block that waits."""
    after: str
    """The block it waits for."""


class RemoveAfter(_Edit):
    """Remove an entry from a block's `after:` list."""

    op: Literal["remove_after"]
    block: str
    """The block whose `after:` changes."""
    after: str
    """The entry to remove."""


class MoveBlock(_Edit):
    """Keep a block's position on the canvas: `metadata.layout.<block>: {x, y}`."""

    op: Literal["move"]
    block: str
    """The block placed."""
    x: float = Field(ge=-1e7, le=1e7)
    """Canvas units, as the editor draws them."""
    y: float = Field(ge=-1e7, le=1e7)


Edit = Annotated[Union[SetField, UnsetField, AddBlock, RemoveBlock, AddAfter, RemoveAfter,
                       MoveBlock], Field(discriminator="op")]


def apply_edits(text: str, edits: list[Any]) -> str:
    """`text` (YAML or JSON) with `edits` applied in order; every line that no
    edit touched is kept as written.  A bad edit raises WorkflowError naming
    it (`edits[2].block`); the result is not validated here (the caller saves
    it like any document, which validates it)."""
    as_json = _is_json(text)
    data = json.loads(text) if as_json else _yaml().load(text)
    if not isinstance(data, dict):
        raise WorkflowError("the stored text is not a mapping: save the whole document "
                            "with PUT instead", where="source")
    base = _dump(data, text, as_json)
    for index, edit in enumerate(edits):
        _apply(data, edit, f"edits[{index}]", as_json)
    return _splice(text, base, _dump(data, text, as_json))


def _is_json(text: str) -> bool:
    if not text.lstrip().startswith("{"):
        return False
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _yaml(mapping: int = 2, sequence: int = 4, offset: int = 2) -> Any:
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096              # never re-wrap a long line the author kept on one
    yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
    return yaml


#: Indent styles tried when dumping: the one closest to the author's text is
#: used, so that new lines (an added block) look like their neighbours.
_STYLES = ((2, 4, 2), (2, 2, 0), (4, 4, 2), (4, 6, 4), (4, 4, 0))


def _dump(data: Any, original: str, as_json: bool) -> str:
    if as_json:
        indent = _json_indent(original)
        return json.dumps(data, indent=indent, ensure_ascii=False) + \
            ("\n" if original.endswith("\n") else "")
    best: tuple[int, str] | None = None
    for style in _STYLES:
        out = io.StringIO()
        _yaml(*style).dump(data, out)
        dumped = out.getvalue()
        matcher = difflib.SequenceMatcher(None, original.splitlines(), dumped.splitlines(),
                                          autojunk=False)
        distance = sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in matcher.get_opcodes()
                       if tag != "equal")
        if best is None or distance < best[0]:
            best = (distance, dumped)
        if distance == 0:
            break
    assert best is not None
    return best[1]


def _json_indent(text: str) -> int | None:
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" ")
        if stripped and len(stripped) < len(line):
            return len(line) - len(stripped)
    return None


def _splice(original: str, base: str, edited: str) -> str:
    """Apply the change from `base` (the unedited text as the dumper writes it)
    to `edited` onto `original`: a changed line of `base` maps to the lines of
    `original` it came from; a region the dumper rewrote (a folded flow
    mapping) is replaced whole only when an edit touches it."""
    ours, theirs, new = (original.splitlines(keepends=True), base.splitlines(keepends=True),
                         edited.splitlines(keepends=True))
    if ours and not ours[-1].endswith(("\n", "\r")):
        ours[-1] += "\n"          # the last line may lack its newline; compare it whole
        trailing = False
    else:
        trailing = True
    # where each boundary of `base` falls in `original`; a region the dumper
    # rewrote is one unit: its inner boundaries have no place of their own
    place: dict[int, int] = {}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ours, theirs,
                                                       autojunk=False).get_opcodes():
        if tag == "equal":
            for k in range(j2 - j1 + 1):
                place[j1 + k] = i1 + k
        else:
            place.setdefault(j1, i1)
            place[j2] = i2
    changes = [op for op in difflib.SequenceMatcher(None, theirs, new,
                                                    autojunk=False).get_opcodes()
               if op[0] != "equal"]
    result: list[str] = []
    done = 0                      # lines of `original` already copied or replaced
    for _, j1, j2, k1, k2 in _widened(changes, place):
        start, end = place[j1], place[j2]
        result.extend(ours[done:start])
        result.extend(new[k1:k2])
        done = max(done, end)
    result.extend(ours[done:])
    text = "".join(result)
    if not trailing and text.endswith("\n") and not edited.endswith("\n"):
        text = text[:-1]
    return text


def _widened(changes: list[tuple], place: dict[int, int]) -> list[tuple]:
    """Each change of `base` widened to boundaries that have a place in the
    original (the ends of a rewritten region), overlapping ones merged."""
    widened: list[list[int]] = []
    for _, j1, j2, k1, k2 in changes:
        while j1 not in place:
            j1, k1 = j1 - 1, k1 - 1
        while j2 not in place:
            j2, k2 = j2 + 1, k2 + 1
        if widened and j1 <= widened[-1][1]:
            last = widened[-1]
            last[1], last[3] = max(last[1], j2), max(last[3], k2)
            last[0], last[2] = min(last[0], j1), min(last[2], k1)
        else:
            widened.append([j1, j2, k1, k2])
    return [(None, *w) for w in widened]


# -- the edits ------------------------------------------------------------------------

def _apply(data: dict, edit: Any, where: str, as_json: bool) -> None:
    if isinstance(edit, AddBlock):
        if edit.parent is None:
            blocks = data.get("blocks")
            if blocks is None:
                data["blocks"] = blocks = []
        else:
            blocks = _find(data, edit.parent, f"{where}.parent")[2].get("blocks")
            if not isinstance(blocks, list):
                raise WorkflowError(f"block '{edit.parent}' holds no `blocks:`: add to a "
                                    f"container (loop, parallel) or leave out `parent`",
                                    where=f"{where}.parent")
        new_id = edit.spec.get("id")
        if isinstance(new_id, str) and _find_or_none(data, new_id) is not None:
            raise WorkflowError(f"a block '{new_id}' already exists: choose another id",
                                where=f"{where}.spec.id")
        blocks.append(edit.spec)
        return
    siblings, index, block = _find(data, edit.block, f"{where}.block")
    if isinstance(edit, (SetField, UnsetField)):
        *parents, last = edit.path.split(".")
        node = block
        for key in parents:
            child = node.get(key)
            if child is None and isinstance(edit, SetField):
                node[key] = child = {}
            if not isinstance(child, dict):
                if isinstance(edit, UnsetField) and child is None:
                    return
                raise WorkflowError(f"`{key}` of block '{edit.block}' is not a mapping, so "
                                    f"`{edit.path}` cannot be reached: set `{key}` itself",
                                    where=f"{where}.path")
            node = child
        if isinstance(edit, SetField):
            node[last] = edit.value
        else:
            _pop(node, last)
    elif isinstance(edit, RemoveBlock):
        del siblings[index]
        layout = _layout(data, create=False)
        if layout is not None:
            layout.pop(edit.block, None)
    elif isinstance(edit, (AddAfter, RemoveAfter)):
        after = block.get("after")
        if after is not None and not isinstance(after, list):
            raise WorkflowError(f"`after:` of block '{edit.block}' is a join ({{all, any}}), "
                                f"not a list: change it with a `set` edit of `after`",
                                where=f"{where}.block")
        if isinstance(edit, AddAfter):
            _find(data, edit.after, f"{where}.after")
            if after is None:
                block["after"] = after = _flow([], as_json)
            if edit.after not in after:
                after.append(edit.after)
        elif after is not None and edit.after in after:
            after.remove(edit.after)
            if not after:
                del block["after"]
    elif isinstance(edit, MoveBlock):
        layout = _layout(data, create=True)
        layout[edit.block] = _flow({"x": _number(edit.x), "y": _number(edit.y)}, as_json)


def _pop(node: dict, key: str) -> None:
    """Remove `key`, keeping the blank lines and comments that follow its value
    (ruamel.yaml attaches them to the key), by handing them to the key before
    when that one holds a plain value."""
    comments = getattr(node, "ca", None)
    if comments is not None and key in comments.items and key in node:
        keys = list(node.keys())
        before = keys[keys.index(key) - 1] if keys.index(key) > 0 else None
        kept = comments.items.pop(key)
        if before is not None and before not in comments.items and \
                not isinstance(node[before], (dict, list)):
            from ruamel.yaml.scalarstring import FoldedScalarString, LiteralScalarString

            token = kept[2] if len(kept) > 2 else None
            if isinstance(node[before], (LiteralScalarString, FoldedScalarString)) and \
                    token is not None and token.value.startswith("\n"):
                token.value = token.value[1:]    # a block scalar ends its own line
            comments.items[before] = kept
    node.pop(key, None)


def _number(value: float) -> int | float:
    return int(value) if value.is_integer() else round(value, 2)


def _flow(value: Any, as_json: bool) -> Any:
    """A short mapping or list written on one line (`{x: 10, y: 20}`)."""
    if as_json:
        return value
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    node = CommentedMap(value) if isinstance(value, dict) else CommentedSeq(value)
    node.fa.set_flow_style()
    return node


def _layout(data: dict, create: bool) -> dict | None:
    metadata = data.get("metadata")
    if metadata is None:
        if not create:
            return None
        data["metadata"] = metadata = {}
    if not isinstance(metadata, dict):
        raise WorkflowError("`metadata` is not a mapping: make it one (the editor keeps "
                            "block positions under `metadata.layout`)", where="metadata")
    layout = metadata.get("layout")
    if layout is None:
        if not create:
            return None
        metadata["layout"] = layout = {}
    if not isinstance(layout, dict):
        raise WorkflowError("`metadata.layout` is not a mapping of block id to {x, y}: "
                            "make it one", where="metadata.layout")
    return layout


def _find_or_none(data: dict, block_id: str) -> tuple[list, int, dict] | None:
    stack = [data.get("blocks")]
    while stack:
        blocks = stack.pop()
        if not isinstance(blocks, list):
            continue
        for index, block in enumerate(blocks):
            if isinstance(block, dict):
                if block.get("id") == block_id:
                    return blocks, index, block
                stack.append(block.get("blocks"))
    return None


def _find(data: dict, block_id: str, where: str) -> tuple[list, int, dict]:
    found = _find_or_none(data, block_id)
    if found is None:
        raise WorkflowError(f"no block '{block_id}' in the document: name a block id that "
                            f"it has", where=where)
    return found
