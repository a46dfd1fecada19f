// The workflow's own settings as edits of its text (id, name, description,
// inputs, variables, defaults.model): like yamlEdits.ts, each changes a
// `yaml` Document in place, so comments and untouched lines stay as written.
import { isMap, isScalar, type Document, type Node as YamlNode, YAMLMap } from "yaml";
import { EditRefused, merge } from "./yamlEdits";
import { renameNamespaced } from "./structureEdits";

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

function mapAt(doc: Document, key: string, create: boolean): YAMLMap | null {
  const found = doc.get(key, true);
  if (isMap(found)) return found;
  if (!create) return null;
  const made = new YAMLMap();
  beforeBlocks(doc, key, made);
  return made;
}

/** A new top-level field, placed before `blocks:` as a person writes it. */
function beforeBlocks(doc: Document, key: string, value: unknown): void {
  const top = doc.contents as YAMLMap;
  const at = top.items.findIndex((pair) => isScalar(pair.key) && pair.key.value === "blocks");
  const pair = doc.createPair(key, value);
  if (at >= 0) top.items.splice(at, 0, pair as any);
  else top.items.push(pair as any);
}

/** Set (or with `undefined`, remove) a top-level field or one under a mapping:
 * `["name"]`, `["defaults", "model"]`, `["inputs", "query", "type"]`. */
export function setSetting(doc: Document, path: string[], value: unknown): void {
  if (!isMap(doc.contents)) throw new EditRefused("the document is not a mapping");
  if (path[0] === "id" && (typeof value !== "string" || !/^[A-Za-z_][A-Za-z0-9_-]*$/.test(value))) {
    throw new EditRefused("a workflow id takes letters, digits, _ and -, starting with a letter or _");
  }
  if (path.length === 1) {
    if (value === undefined) doc.delete(path[0]);
    else if (doc.has(path[0])) doc.set(path[0], merge(doc, doc.get(path[0], true), value, true));
    else beforeBlocks(doc, path[0], doc.createNode(value));
    return;
  }
  let map = mapAt(doc, path[0], value !== undefined);
  if (!map) return;
  const parents: YAMLMap[] = [map];
  for (const key of path.slice(1, -1)) {
    const found: unknown = map.get(key, true);
    let next: YAMLMap;
    if (isMap(found)) next = found;
    else {
      if (value === undefined) return;
      next = new YAMLMap();
      next.flow = map.flow;
      map.set(key, next);
    }
    map = next;
    parents.push(map);
  }
  const last = path[path.length - 1];
  if (value === undefined) map.delete(last);
  else map.set(last, merge(doc, map.get(last, true), value, Boolean(map.flow) || path[0] === "inputs"));
  // an emptied mapping goes too (no `inputs: {}` left behind)
  for (let k = parents.length - 1; k >= 0; k--) {
    if (parents[k].items.length) break;
    if (k === 0) doc.delete(path[0]);
    else parents[k - 1].delete(path[k]);
  }
}

/** Rename an input or a variable (`section` is `inputs` or `variables`), its
 * place kept; every `{{input.from}}` / `input.from` (`vars.` for a variable)
 * in the blocks follows, in the same edit. */
export function renameEntry(doc: Document, section: "inputs" | "variables", from: string, to: string): void {
  if (from === to) return;
  if (!NAME.test(to)) {
    throw new EditRefused(`'${to}' is not a usable name: letters, digits and _, starting with a letter or _`);
  }
  const map = mapAt(doc, section, false);
  if (!map) throw new EditRefused(`there is no \`${section}:\` in the document`);
  if (map.has(to)) throw new EditRefused(`${section} has '${to}' already`);
  const pair = map.items.find((p) => isScalar(p.key) && String(p.key.value) === from);
  if (!pair) throw new EditRefused(`${section} has no '${from}'`);
  pair.key = doc.createNode(to) as YamlNode;
  renameNamespaced(doc, section === "inputs" ? "input" : "vars", from, to);
}

/** A name for a new entry of `section`: `input_1`, `input_2`... */
export function freshEntry(doc: Document, section: "inputs" | "variables", stem: string): string {
  const map = mapAt(doc, section, false);
  for (let n = 1; ; n++) if (!map?.has(`${stem}_${n}`)) return `${stem}_${n}`;
}
