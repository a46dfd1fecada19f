// Canvas and form actions as edits of the YAML text, which stays the one
// source of truth in the browser. An action changes a `yaml` Document (which
// keeps comments); only the lines the change touched are then spliced into
// the author's text, the way the server's PATCH does (workflow/text_edits.py):
// a line no action touched stays byte for byte as written, even where the
// dumper would write it otherwise.
import YAML, { isCollection, isMap, isPair, isScalar, isSeq, type Document, YAMLMap, YAMLSeq } from "yaml";
import { diffArrays } from "diff";

const DUMP = { lineWidth: 0, minContentWidth: 0, flowCollectionPadding: false };

/** The dumper writes new lines the way the author writes: sequences under
 * their key (`blocks:\n- id: a`) or indented (`blocks:\n  - id: a`), and
 * the author's indent width. */
function style(text: string) {
  const unindented = /^( *)[^\s#-][^\n]*:[ \t]*(#[^\n]*)?\n(?:[ \t]*#[^\n]*\n)*\1- /m.test(text);
  const nested = /^[^\s#-][^\n]*:[ \t]*(#[^\n]*)?\n(?:[ \t]*#[^\n]*\n)*( +)[^\s#-]/m.exec(text);
  const indent = nested ? Math.min(Math.max(nested[2].length, 2), 8) : 2;
  return { ...DUMP, indentSeq: !unindented, indent };
}

export class EditRefused extends Error {}

/** `text` with `change` applied to its Document, all other lines as written. */
export function editText(text: string, change: (doc: Document) => void): string {
  const before = YAML.parseDocument(text);
  if (before.errors.length) {
    throw new EditRefused(`the YAML does not parse (${before.errors[0].message.split("\n")[0]}): ` +
                          "fix the text first");
  }
  const doc = YAML.parseDocument(text);
  change(doc);
  const options = style(text);
  return splice(text, before.toString(options), doc.toString(options));
}

/** Three-way: `dumped` is the dumper's copy of `original`, `edited` the
 * dumper's copy after the change. Every line the change left alone is taken
 * from `original`; a region where the author's layout and the dumper's differ
 * is taken whole from `edited` only when the change reaches into it. */
export function splice(original: string, dumped: string, edited: string): string {
  const o = original.split("\n");
  const a = dumped.split("\n");
  const b = edited.split("\n");
  const deleted = new Array<boolean>(a.length).fill(false);
  const inserted: string[][] = Array.from({ length: a.length + 1 }, () => []);
  let ai = 0;
  for (const part of diffArrays(a, b)) {
    if (part.added) inserted[ai].push(...part.value);
    else if (part.removed) for (let k = 0; k < part.value.length; k++) deleted[ai++] = true;
    else ai += part.value.length;
  }
  const out: string[] = [];
  const emitA = (from: number, to: number) => {
    for (let k = from; k < to; k++) {
      out.push(...inserted[k]);
      if (!deleted[k]) out.push(a[k]);
    }
  };
  let oi = 0;
  ai = 0;
  let pendingO: string[] = [];
  let pendingA = 0;
  const flush = () => {                      // a region where author and dumper differ
    const from = ai - pendingA;
    if (pendingO.length === pendingA) {      // line for line (spacing, quotes): each its own
      for (let k = 0; k < pendingA; k++) {
        out.push(...inserted[from + k]);
        if (!deleted[from + k]) out.push(pendingO[k]);
      }
      pendingO = [];
      pendingA = 0;
      return;
    }
    let touched = false;
    for (let k = from; k < ai; k++) if (deleted[k] || (k > from && inserted[k].length)) touched = true;
    if (touched) emitA(from, ai);
    else {
      if (pendingA > 0) out.push(...inserted[from]);
      out.push(...pendingO);
    }
    pendingO = [];
    pendingA = 0;
  };
  for (const part of diffArrays(o, a)) {
    if (part.removed) { pendingO.push(...part.value); oi += part.value.length; }
    else if (part.added) { pendingA += part.value.length; ai += part.value.length; }
    else {
      flush();
      emitA(ai, ai + part.value.length);
      ai += part.value.length;
      oi += part.value.length;
    }
  }
  flush();
  out.push(...inserted[a.length]);
  return out.join("\n");
}

// -- finding things ---------------------------------------------------------

interface Found { node: YAMLMap; seq: YAMLSeq; index: number; parent: string | null }

function blocksOf(map: unknown): YAMLSeq | null {
  const blocks = isMap(map) ? map.get("blocks", true) : null;
  return isSeq(blocks) ? blocks : null;
}

export function findBlock(doc: Document, id: string): Found | null {
  const walk = (seq: YAMLSeq | null, parent: string | null): Found | null => {
    if (!seq) return null;
    for (let index = 0; index < seq.items.length; index++) {
      const node = seq.items[index];
      if (!isMap(node)) continue;
      if (String(node.get("id")) === id) return { node, seq, index, parent };
      const inner = walk(blocksOf(node), String(node.get("id")));
      if (inner) return inner;
    }
    return null;
  };
  return walk(blocksOf(doc.contents), null);
}

function mustFind(doc: Document, id: string): Found {
  const found = findBlock(doc, id);
  if (!found) throw new EditRefused(`there is no block '${id}' in the document`);
  return found;
}

/** Every block id in the document, containers' children included. */
export function blockIds(doc: Document): string[] {
  const ids: string[] = [];
  const walk = (seq: YAMLSeq | null) => {
    for (const node of seq?.items ?? []) {
      if (!isMap(node)) continue;
      ids.push(String(node.get("id")));
      walk(blocksOf(node));
    }
  };
  walk(blocksOf(doc.contents));
  return ids;
}

/** Template namespaces a block id may not take (workflow/graph.py NAMESPACES);
 * `input` is allowed for the one `input` block. */
export const RESERVED = new Set(["input", "vars", "env", "secrets", "memory", "user", "loop", "run"]);

/** A fresh id for a block of `base` (its type or registry id): `llm`, `llm_2`...;
 * a type named like a template namespace is numbered from 1 (`loop_1`), so the
 * id is valid as added. */
export function freshId(doc: Document, base: string): string {
  const taken = new Set(blockIds(doc));
  const stem = base.replace(/[^A-Za-z0-9_]+/g, "_").replace(/^[^A-Za-z_]+/, "") || "block";
  const reserved = RESERVED.has(stem) && stem !== "input";
  if (!taken.has(stem) && !reserved) return stem;
  for (let n = reserved ? 1 : 2; ; n++) if (!taken.has(`${stem}_${n}`)) return `${stem}_${n}`;
}

// -- the actions --------------------------------------------------------------

/** Add a block at the end of `blocks:` (block style, as a person writes it). */
export function addBlock(doc: Document, spec: Record<string, unknown>,
                         at?: { x: number; y: number }): void {
  let seq = blocksOf(doc.contents);
  if (!seq) {
    seq = new YAMLSeq();
    doc.set("blocks", seq);
  }
  if (seq.flow && seq.items.length === 0) seq.flow = false;
  seq.add(doc.createNode(spec));
  if (at) setPosition(doc, String(spec.id), at.x, at.y);
}

/** Remove a block with every place that names it in `after:`, a condition's
 * case or default, an approval's `on_reject`, an `on_error`, and its position. */
export function removeBlock(doc: Document, id: string): void {
  const found = mustFind(doc, id);
  found.seq.items.splice(found.index, 1);
  const walk = (seq: YAMLSeq | null) => {
    for (const node of seq?.items ?? []) {
      if (!isMap(node)) continue;
      unlink(node, id);
      walk(blocksOf(node));
    }
  };
  walk(blocksOf(doc.contents));
  const layout = doc.getIn(["metadata", "layout"], true);
  if (isMap(layout)) {
    layout.delete(id);
    if (layout.items.length === 0) doc.deleteIn(["metadata", "layout"]);
    const metadata = doc.get("metadata", true);
    if (isMap(metadata) && metadata.items.length === 0) doc.delete("metadata");
  }
}

/** Every mention of `target` in `node` as an edge; true when one was removed. */
function unlink(node: YAMLMap, target: string, only?: "after" | "route"): boolean {
  let removed = false;
  const after = node.get("after", true);
  if (only !== "route" && isSeq(after)) {
    const before = after.items.length;
    after.items = after.items.filter((item) => !(isScalar(item) && String(item.value) === target));
    if (after.items.length !== before) removed = true;
    if (after.items.length === 0) node.delete("after");
  }
  if (only === "after") return removed;
  const type = String(node.get("type") ?? "");
  const config = node.get("with", true);
  if (isMap(config) && type === "condition") {
    const cases = config.get("cases", true);
    if (isSeq(cases)) {
      const before = cases.items.length;
      cases.items = cases.items.filter((item) => !(isMap(item) && String(item.get("goto")) === target));
      if (cases.items.length !== before) removed = true;
    }
    if (String(config.get("default")) === target) { config.delete("default"); removed = true; }
  }
  if (isMap(config) && type === "approval" && String(config.get("on_reject")) === target) {
    config.delete("on_reject");
    removed = true;
  }
  if (String(node.get("on_error")) === target) { node.delete("on_error"); removed = true; }
  return removed;
}

/** The edge `source` -> `target` drawn on the canvas: a condition's case (its
 * `goto`; from the `default` handle its default), an approval's `on_reject`
 * (from its `reject` handle), else an `after:` entry of the target. */
export function connect(doc: Document, source: string, target: string,
                        handle?: string | null): void {
  if (source === target) throw new EditRefused("a block cannot follow itself");
  const from = mustFind(doc, source);
  const to = mustFind(doc, target);
  if (from.parent !== to.parent) {
    throw new EditRefused(`'${source}' and '${target}' are not in the same container: ` +
                          "only sibling blocks can be connected");
  }
  const type = String(from.node.get("type") ?? "");
  if (type === "condition") {
    const config = ensureMap(from.node, "with");
    if (handle === "default") { config.set("default", target); return; }
    const found: unknown = config.get("cases", true);
    let cases: YAMLSeq;
    if (isSeq(found)) cases = found;
    else { cases = new YAMLSeq(); config.set("cases", cases); }
    const match = /^case-(\d+)$/.exec(handle ?? "");
    const chosen = match ? cases.items[Number(match[1])] : null;
    if (isMap(chosen)) chosen.set("goto", target);
    else {
      const added = doc.createNode({ when: "", goto: target });
      const model = cases.items.find((item) => isCollection(item));
      if (isCollection(model)) added.flow = Boolean(model.flow);   // as the others are written
      cases.add(added);
    }
    return;
  }
  if (type === "approval" && handle === "reject") {
    ensureMap(from.node, "with").set("on_reject", target);
    return;
  }
  const present: unknown = to.node.get("after", true);
  let after: YAMLSeq;
  if (isSeq(present)) after = present;
  else {
    after = doc.createNode([], { flow: true }) as YAMLSeq;
    to.node.set("after", after);
  }
  if (!after.items.some((item) => isScalar(item) && String(item.value) === source)) {
    after.add(doc.createNode(source));
  }
}

/** Remove the edge `source` -> `target`; refused (saying where) when it comes
 * from a template reference, which only the text can change. */
export function disconnect(doc: Document, source: string, target: string): void {
  const from = mustFind(doc, source);
  const to = mustFind(doc, target);
  const removed = unlink(from.node, target, "route") || unlink(to.node, source, "after");
  if (!removed) {
    throw new EditRefused(`'${target}' reads '${source}' in a template ({{${source}...}}) or an expression: ` +
                          `edit that field of '${target}' to remove the edge`);
  }
}

/** Where a block sits on the canvas: `metadata.layout.<id>: {x, y}` (the engine
 * ignores `metadata`; the position travels with the document). */
export function setPosition(doc: Document, id: string, x: number, y: number): void {
  let layout = doc.getIn(["metadata", "layout"], true);
  if (!isMap(layout)) {
    layout = new YAMLMap();
    doc.setIn(["metadata", "layout"], layout);
  }
  (layout as YAMLMap).set(id, doc.createNode({ x: Math.round(x), y: Math.round(y) }, { flow: true }));
}

function ensureMap(node: YAMLMap, key: string): YAMLMap {
  const value = node.get(key, true);
  if (isMap(value)) return value;
  const fresh = new YAMLMap();
  fresh.flow = Boolean(node.flow);
  node.set(key, fresh);
  return fresh;
}

/** `value` written over `node` in place: scalars keep their quoting and
 * comments, lists and mappings their style and every item that did not
 * change; only what differs is created anew. Returns the node to keep. */
export function merge(doc: Document, node: unknown, value: unknown, flowNew: boolean): unknown {
  if (isScalar(node) && (value === null || typeof value !== "object")) {
    if (node.value !== value) {
      node.value = value;
      if (typeof value === "string" && value.includes("\n")) node.type = "BLOCK_LITERAL";
      else if (typeof value === "string" && node.type === "BLOCK_LITERAL") node.type = undefined;
    }
    return node;
  }
  if (isSeq(node) && Array.isArray(value)) {
    const model = node.items.find((item) => isCollection(item)) as YAMLMap | YAMLSeq | undefined;
    node.items = value.map((item, index) =>
      merge(doc, node.items[index], item, model ? Boolean(model.flow) : Boolean(node.flow)));
    return node;
  }
  if (isMap(node) && value && typeof value === "object" && !Array.isArray(value)) {
    const entries = value as Record<string, unknown>;
    const keyOf = (pair: { key: unknown }) => (isScalar(pair.key) ? String(pair.key.value) : String(pair.key));
    // a key renamed (one gone, one new in the same edit) keeps its line and comment
    const present = new Set(node.items.map(keyOf));
    const renamed = Object.keys(entries).filter((key) => !present.has(key));
    for (const pair of [...node.items]) {
      const key = keyOf(pair);
      if (Object.prototype.hasOwnProperty.call(entries, key)) continue;
      const to = renamed.shift();
      if (to !== undefined && isScalar(pair.key)) pair.key.value = to;
      else node.delete(pair.key);
    }
    for (const [key, item] of Object.entries(entries)) {
      node.set(key, merge(doc, node.get(key, true), item, Boolean(node.flow)));
    }
    return node;
  }
  const created = doc.createNode(value, { flow: flowNew });
  if (isScalar(created) && typeof value === "string" && value.includes("\n")) {
    created.type = "BLOCK_LITERAL";
  }
  return created;
}

/** Set one field of a block (`["with", "prompt"]`); a text of several lines
 * is written as a `|` block, as a person writes a prompt. */
export function setField(doc: Document, id: string, path: string[], value: unknown): void {
  const { node } = mustFind(doc, id);
  let map = node;
  for (const key of path.slice(0, -1)) map = ensureMap(map, key);
  const last = path[path.length - 1];
  map.set(last, merge(doc, map.get(last, true), value, true));
}

/** Remove one field; an emptied `with` goes too (no `with: {}` left behind). */
export function unsetField(doc: Document, id: string, path: string[]): void {
  const { node } = mustFind(doc, id);
  let map: unknown = node;
  const parents: YAMLMap[] = [];
  for (const key of path.slice(0, -1)) {
    parents.push(map as YAMLMap);
    map = (map as YAMLMap).get(key, true);
    if (!isMap(map)) return;
  }
  (map as YAMLMap).delete(path[path.length - 1]);
  for (let k = path.length - 2; k >= 0; k--) {
    const child = parents[k].get(path[k], true);
    if (isMap(child) && child.items.length === 0) parents[k].delete(path[k]);
    else break;
  }
}
