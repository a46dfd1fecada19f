// Edits that change a workflow's shape rather than one field: a block renamed
// (every place that names it follows), a block moved into or out of a loop or
// parallel container. Like yamlEdits.ts they change a `yaml` Document, and
// the page splices only the touched lines into the author's text, so each is
// one edit of the text (one undo step).
import YAML, { isMap, isScalar, isSeq, type Document, type Node as YamlNode, YAMLMap, YAMLSeq } from "yaml";
import { EditRefused, RESERVED, blockIds, findBlock } from "./yamlEdits";
const ID = /^[A-Za-z_][A-Za-z0-9_-]*$/;

/** Why `id` cannot be a block id here (`type` is the block's), or null. */
export function idProblem(doc: Document, id: string, type: string | null, current?: string): string | null {
  if (!ID.test(id)) {
    return `'${id}' is not a block id: use letters, digits, _ and -, starting with a letter or _`;
  }
  if (id.length > 128) return "a block id has at most 128 characters";
  if (RESERVED.has(id) && !(id === "input" && type === "input")) {
    return `'${id}' is a reserved template namespace: choose another block id (e.g. '${id}_1')`;
  }
  if (id !== current && blockIds(doc).includes(id)) return `a block '${id}' exists already: choose another id`;
  return null;
}

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\-]/g, "\\$&");

/** Each string scalar under `node` (not into child blocks: they are walked as blocks). */
function eachString(node: unknown, visit: (scalar: any, key: string | null) => void,
                    key: string | null = null): void {
  if (isScalar(node)) { if (typeof node.value === "string") visit(node, key); return; }
  if (isSeq(node)) { node.items.forEach((item) => eachString(item, visit, key)); return; }
  if (isMap(node)) {
    for (const pair of node.items) {
      const name = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
      eachString(pair.value, visit, name);
    }
  }
}

const EXPRESSION_KEYS = new Set(["when", "until", "expr"]);

/** Rename block `from` to `to`: its id, every `after:` entry (list or join),
 * template reference (`{{from.x}}`), expression (`from.x >= 8`), condition
 * `goto`/`default`, approval `on_reject`, `on_error`, in every scope, and its
 * `metadata.layout` entry (position kept). Refused, saying why, when `to` is
 * not a usable id. */
export function renameBlock(doc: Document, from: string, to: string): void {
  const found = findBlock(doc, from);
  if (!found) throw new EditRefused(`there is no block '${from}' in the document`);
  if (from === to) return;
  const problem = idProblem(doc, to, String(found.node.get("type") ?? ""), from);
  if (problem) throw new EditRefused(problem);
  found.node.set("id", to);
  rewrite(doc.get("blocks", true), from, to);
  const layout = doc.getIn(["metadata", "layout"], true);
  if (isMap(layout)) {
    const pair = layout.items.find((p) => (isScalar(p.key) ? String(p.key.value) : String(p.key)) === from);
    if (pair) pair.key = doc.createNode(to) as YamlNode;
  }
}

/** In `blocks` (a `blocks:` list) and every block inside them, each place
 * that names block `from` (after, templates, expressions, routes, on_error)
 * names `to` instead. */
function rewrite(blocks: unknown, from: string, to: string): void {
  const template = new RegExp(`(\\{\\{\\s*)${escape(from)}(?![A-Za-z0-9_-])`, "g");
  const expression = new RegExp(`(?<![\\w.])${escape(from)}(?=\\s*\\.)`, "g");
  const rename = (scalar: any) => { if (isScalar(scalar) && scalar.value === from) scalar.value = to; };
  const walk = (seq: unknown) => {
    if (!isSeq(seq)) return;
    for (const block of seq.items) {
      if (!isMap(block)) continue;
      const after = block.get("after", true);
      if (isSeq(after)) after.items.forEach(rename);
      else if (isMap(after)) {
        for (const pair of after.items) {
          if (isSeq(pair.value)) pair.value.items.forEach(rename);
          else rename(pair.value);
        }
      }
      rename(block.get("on_error", true));
      const config = block.get("with", true);
      if (isMap(config)) {
        rename(config.get("default", true));
        rename(config.get("on_reject", true));
        const cases = config.get("cases", true);
        if (isSeq(cases)) cases.items.forEach((c) => { if (isMap(c)) rename(c.get("goto", true)); });
      }
      for (const pair of block.items) {
        const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
        if (["id", "type", "uses", "after", "on_error", "blocks"].includes(key)) continue;
        eachString(pair.value, (scalar, name) => {
          let value: string = scalar.value.replace(template, `$1${to}`);
          if (name && EXPRESSION_KEYS.has(name)) value = value.replace(expression, to);
          if (value !== scalar.value) scalar.value = value;
        });
      }
      walk(block.get("blocks", true));
    }
  };
  walk(blocks);
}

/** A workflow input or variable renamed (`ns` is `input` or `vars`): every
 * `{{input.from...}}` template and `input.from` in an expression (`when`,
 * `until`, `expr`) of every block, at every depth, reads `to` instead. */
export function renameNamespaced(doc: Document, ns: string, from: string, to: string): void {
  const head = `${escape(ns)}\\s*\\.\\s*`;
  const template = new RegExp(`(\\{\\{\\s*${head})${escape(from)}(?![A-Za-z0-9_-])`, "g");
  const expression = new RegExp(`((?<![\\w.])${head})${escape(from)}(?![A-Za-z0-9_])`, "g");
  const walk = (seq: unknown) => {
    if (!isSeq(seq)) return;
    for (const block of seq.items) {
      if (!isMap(block)) continue;
      for (const pair of block.items) {
        const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
        if (["id", "type", "uses", "after", "on_error", "blocks"].includes(key)) continue;
        eachString(pair.value, (scalar, name) => {
          let value: string = scalar.value.replace(template, `$1${to}`);
          if (name && EXPRESSION_KEYS.has(name)) value = value.replace(expression, `$1${to}`);
          if (value !== scalar.value) scalar.value = value;
        });
      }
      walk(block.get("blocks", true));
    }
  };
  walk(doc.get("blocks", true));
}

/** The ids of a block and of every block inside it. */
function idsWithin(node: YAMLMap): string[] {
  const out = [String(node.get("id"))];
  const inner = node.get("blocks", true);
  if (isSeq(inner)) for (const child of inner.items) if (isMap(child)) out.push(...idsWithin(child));
  return out;
}

/** Move block `id` into container `into` (a loop or parallel), or out to the
 * top level with `into` null. The edges that would cross a container's wall
 * (`after:` entries, a condition's targets, `on_error`) go: only siblings can
 * be connected. Template references stay, for the author to see (validation
 * names any a child may no longer read). */
export function moveBlock(doc: Document, id: string, into: string | null): void {
  const found = findBlock(doc, id);
  if (!found) throw new EditRefused(`there is no block '${id}' in the document`);
  if (found.parent === into) return;
  let target: YAMLSeq;
  if (into === null) {
    const top = doc.get("blocks", true);
    if (!isSeq(top)) throw new EditRefused("the document has no `blocks:` list");
    target = top;
  } else {
    const container = findBlock(doc, into);
    if (!container) throw new EditRefused(`there is no block '${into}' in the document`);
    const type = String(container.node.get("type") ?? "");
    if (type !== "loop" && type !== "parallel") {
      throw new EditRefused(`'${into}' is a ${type || "block"}, not a loop or parallel: ` +
                            "only containers hold blocks");
    }
    if (idsWithin(found.node).includes(into)) {
      throw new EditRefused(`'${into}' is inside '${id}': a block cannot go inside itself`);
    }
    const present = container.node.get("blocks", true);
    if (isSeq(present)) target = present;
    else {
      target = new YAMLSeq();
      container.node.set("blocks", target);
    }
    if (target.flow) target.flow = false;
  }
  // the edges between the block and its old siblings
  const siblings = found.seq.items.filter((item) => item !== found.node && isMap(item))
    .map((item) => String((item as YAMLMap).get("id")));
  found.seq.items.splice(found.index, 1);
  for (const item of found.seq.items) if (isMap(item)) dropMentions(item, (name) => name === id);
  dropMentions(found.node, (name) => siblings.includes(name));
  if (found.parent !== null && found.seq.items.length === 0) {
    const parent = findBlock(doc, found.parent);
    parent?.node.delete("blocks");
  }
  target.add(found.node);
  const layout = doc.getIn(["metadata", "layout"], true);
  if (isMap(layout)) layout.delete(id);          // its old place meant another frame
}

/** Remove from `node`'s `after:`, routes and `on_error` every block id that `drop` picks. */
function dropMentions(node: YAMLMap, drop: (id: string) => boolean): void {
  const gone = (item: unknown) => isScalar(item) && drop(String(item.value));
  const after = node.get("after", true);
  if (isSeq(after)) {
    after.items = after.items.filter((item) => !gone(item));
    if (after.items.length === 0) node.delete("after");
  } else if (isMap(after)) {
    for (const pair of [...after.items]) {
      if (isSeq(pair.value)) {
        pair.value.items = pair.value.items.filter((item) => !gone(item));
        if (pair.value.items.length === 0) after.delete(pair.key);
      }
    }
    if (after.items.length === 0) node.delete("after");
  }
  if (gone(node.get("on_error", true))) node.delete("on_error");
  const config = node.get("with", true);
  if (isMap(config)) {
    if (gone(config.get("default", true))) config.delete("default");
    if (gone(config.get("on_reject", true))) config.delete("on_reject");
    const cases = config.get("cases", true);
    if (isSeq(cases)) cases.items = cases.items.filter((c) => !(isMap(c) && gone(c.get("goto", true))));
  }
}

/** A copy of block `id`, children included, right after it: every copied
 * block gets a fresh id (`draft_2`), and the copies read each other where the
 * originals did; what the original reads outside stays as it is. Returns the
 * copy's id. */
export function duplicateBlock(doc: Document, id: string): string {
  const found = findBlock(doc, id);
  if (!found) throw new EditRefused(`there is no block '${id}' in the document`);
  const copy = found.node.clone() as YAMLMap;
  const taken = new Set(blockIds(doc));
  const renames: [string, string][] = [];
  const walk = (node: YAMLMap) => {
    const old = String(node.get("id"));
    const stem = old.replace(/_\d+$/, "");
    let n = 2;
    while (taken.has(`${stem}_${n}`)) n++;
    taken.add(`${stem}_${n}`);
    renames.push([old, `${stem}_${n}`]);
    node.set("id", `${stem}_${n}`);
    const inner = node.get("blocks", true);
    if (isSeq(inner)) for (const child of inner.items) if (isMap(child)) walk(child);
  };
  walk(copy);
  const inner = copy.get("blocks", true);
  for (const [from, to] of renames.slice(1)) rewrite(inner, from, to);
  found.seq.items.splice(found.index + 1, 0, copy);
  const layout = doc.getIn(["metadata", "layout"], true);
  const at = isMap(layout) ? layout.get(id, true) : null;
  if (isMap(at) && isMap(layout)) {
    layout.set(renames[0][1], doc.createNode({ x: Number(at.get("x")) + 40, y: Number(at.get("y")) + 40 },
                                             { flow: true }));
  }
  return renames[0][1];
}

/** Block `id` with its children as the clipboard holds it: YAML text, a
 * one-item block list (`- id: ...`), comments kept, so it also pastes as
 * text into a `blocks:` list of the YAML pane or of another workflow. */
export function copyBlock(doc: Document, id: string): string {
  const found = findBlock(doc, id);
  if (!found) throw new EditRefused(`there is no block '${id}' in the document`);
  const out = new YAML.Document([]);
  (out.contents as YAMLSeq).items.push(found.node.clone());
  return out.toString({ lineWidth: 0, flowCollectionPadding: false });
}

/** Paste blocks copied with `copyBlock` (or any YAML block or list of
 * blocks) next to block `near`: into it when it is a loop or parallel (as
 * its last children), else right after it among its siblings; at the end
 * of the top-level `blocks:` when nothing is chosen. Every pasted block
 * whose id is taken gets a fresh one (`summarise_2`) and the pasted blocks
 * read each other where the copies did. As in Sim, only the edges inside
 * the copy come along: an `after:`, route or `on_error` naming a block
 * outside it is dropped (the paste may land where that block is not a
 * sibling, or in another workflow); a template reference to an outside
 * block stays, as Sim keeps `<block.field>` text, and validation names it
 * where it cannot be read. Returns the pasted top blocks' ids and the
 * container they went into (null: the top level). */
export function pasteBlocks(doc: Document, text: string, near: string | null): { ids: string[]; into: string | null } {
  const clip = YAML.parseDocument(text);
  const roots = isSeq(clip.contents) ? clip.contents.items : [clip.contents];
  const usable = (node: unknown): node is YAMLMap => isMap(node) && typeof node.get("id") === "string";
  if (clip.errors.length || !roots.length || !roots.every(usable)) {
    throw new EditRefused("the clipboard holds no block: copy a block first (select it, then Ctrl+C)");
  }
  const copies = new YAMLSeq();
  copies.items = (roots as YAMLMap[]).map((node) => node.clone());
  const present = new Set(blockIds(doc));
  const old: string[] = [];
  const collect = (seq: unknown) => {
    if (!isSeq(seq)) return;
    for (const node of seq.items) if (usable(node)) { old.push(String(node.get("id"))); collect(node.get("blocks", true)); }
  };
  collect(copies);
  const taken = new Set([...present, ...old]);
  const renames: [string, string][] = [];
  const inside = new Set<string>();
  for (const from of old) {
    let to = from;
    if (present.has(from) || idProblem(doc, from, null) !== null) {
      const stem = from.replace(/_\d+$/, "").replace(/[^A-Za-z0-9_-]+/g, "_").replace(/^[^A-Za-z_]+/, "") || "block";
      let n = 2;
      while (taken.has(`${stem}_${n}`)) n++;
      to = `${stem}_${n}`;
      taken.add(to);
      renames.push([from, to]);
    }
    inside.add(to);
  }
  const setIds = (seq: unknown) => {
    if (!isSeq(seq)) return;
    for (const node of seq.items) {
      if (!usable(node)) continue;
      const renamed = renames.find(([from]) => from === String(node.get("id")));
      if (renamed) node.set("id", renamed[1]);
      setIds(node.get("blocks", true));
    }
  };
  setIds(copies);
  for (const [from, to] of renames) rewrite(copies, from, to);
  const cut = (seq: unknown) => {
    if (!isSeq(seq)) return;
    for (const node of seq.items) if (isMap(node)) { dropMentions(node, (id) => !inside.has(id)); cut(node.get("blocks", true)); }
  };
  cut(copies);

  let target: YAMLSeq;
  let index: number;
  let into: string | null = null;
  const chosen = near ? findBlock(doc, near) : null;
  const type = chosen ? String(chosen.node.get("type") ?? "") : "";
  if (chosen && (type === "loop" || type === "parallel")) {
    into = near;
    const children = chosen.node.get("blocks", true);
    if (isSeq(children)) target = children;
    else { target = new YAMLSeq(); chosen.node.set("blocks", target); }
    index = target.items.length;
  } else if (chosen) {
    into = chosen.parent;
    target = chosen.seq;
    index = chosen.index + 1;
  } else {
    const top = doc.get("blocks", true);
    if (isSeq(top)) target = top;
    else { target = new YAMLSeq(); doc.set("blocks", target); }
    index = target.items.length;
  }
  if (target.flow) target.flow = false;
  target.items.splice(index, 0, ...copies.items);
  return { ids: copies.items.map((node) => String((node as YAMLMap).get("id"))), into };
}

/** Auto-layout: the positions the author dragged are dropped (`metadata.layout`),
 * so the canvas lays every block out again. */
export function clearLayout(doc: Document): void {
  doc.deleteIn(["metadata", "layout"]);
  const metadata = doc.get("metadata", true);
  if (isMap(metadata) && metadata.items.length === 0) doc.delete("metadata");
}

/** Add (`on`) or remove `source` in block `id`'s `after:` list: the "runs
 * after" choice of the block form, an edge without dragging. */
export function setAfter(doc: Document, id: string, source: string, on: boolean): void {
  const found = findBlock(doc, id);
  if (!found) throw new EditRefused(`there is no block '${id}' in the document`);
  const present = found.node.get("after", true);
  if (isMap(present)) {
    throw new EditRefused(`'${id}' has a join (\`after: {all: ..., any: ...}\`): edit it in the YAML`);
  }
  const names = isSeq(present) ? present.items.map((item) => String(isScalar(item) ? item.value : item)) : [];
  if (on === names.includes(source)) return;
  if (on) {
    if (source === id) throw new EditRefused("a block cannot run after itself");
    if (isSeq(present)) present.add(doc.createNode(source));
    else found.node.set("after", doc.createNode([source], { flow: true }));
  } else if (isSeq(present)) {
    present.items = present.items.filter((item) => !(isScalar(item) && String(item.value) === source));
    if (present.items.length === 0) found.node.delete("after");
  }
}
