// The document format as the server states it (GET /api/schema, what
// `flowforge schema` prints): the palette lists its block types with their
// one-line descriptions and each block's form is drawn from its config
// schema, so a new block type needs no change here.
import { api } from "./api";

export type Schema = Record<string, any>;

let loading: Promise<Schema> | null = null;

export function loadSchema(): Promise<Schema> {
  loading ??= api<Schema>("GET", "/api/schema").catch((error) => { loading = null; throw error; });
  return loading;
}

export interface BlockKind { type: string; description: string }

export function blockKinds(schema: Schema): BlockKind[] {
  const kind = schema.$defs?.BlockSpec?.properties?.type ?? {};
  return (kind.oneOf ?? (kind.enum ?? []).map((name: string) => ({ const: name })))
    .map((entry: any) => ({ type: String(entry.const), description: String(entry.description ?? "") }));
}

export function resolve(schema: Schema, node: any): any {
  let current = node;
  for (let depth = 0; current && typeof current.$ref === "string" && depth < 20; depth++) {
    const name = current.$ref.replace(/^#\/\$defs\//, "");
    current = { ...schema.$defs?.[name], ...Object.fromEntries(
      Object.entries(current).filter(([key]) => key !== "$ref")) };
  }
  return current;
}

/** The config schema of a block type (the `then` of its `if type == ...`). */
export function configSchema(schema: Schema, type: string): any | null {
  for (const branch of schema.$defs?.BlockSpec?.allOf ?? []) {
    if (branch?.if?.properties?.type?.const === type) {
      return resolve(schema, branch.then?.properties?.with ?? null);
    }
  }
  return null;
}

export interface Field {
  name: string;
  kind: "text" | "long-text" | "number" | "integer" | "boolean" | "choice" | "yaml" | "list" | "lines" | "map";
  choices?: string[];
  /** For a `list` (objects with named fields, e.g. a condition's cases): the fields of one item. */
  items?: Field[];
  /** For a `map` (free keys, e.g. a knowledge block's filters): what its values may be. */
  values?: ValueKind[];
  required: boolean;
  description: string;
  default?: unknown;
  expression: boolean;
  /** The property's schema ($refs resolved at the top), for `shapeProblem`. */
  prop?: any;
}

const LONG = /prompt|system|message|content|template|text|body|instructions|query/;

/** What a value of a `map` field may be written as in the form. */
export type ValueKind = "text" | "number" | "integer" | "list" | "boolean";

export const ANY_VALUE: ValueKind[] = ["text", "number", "list", "boolean"];

/** The value kinds of a mapping with free keys (`{type: object}` with no
 * named properties: filters, a set block's `with`, headers), from what its
 * `additionalProperties` allows; null when `prop` is no such mapping. A JSON
 * Schema (an output schema) is a mapping too, but a nested one: it stays YAML. */
export function mapValues(schema: Schema, prop: any): ValueKind[] | null {
  const options = [prop, ...(prop.anyOf ?? [])].map((p: any) => resolve(schema, p));
  const map = options.find((p: any) => p.type === "object" && !p.properties && p.additionalProperties !== false);
  if (!map || /JSON Schema/i.test(String(prop.description ?? ""))) return null;
  const kindsOf = (node: any): ValueKind[] => {
    if (node === undefined || node === true || (typeof node === "object" && !Object.keys(node).length)) {
      return ANY_VALUE;
    }
    const value = resolve(schema, node);
    if (value.anyOf) return [...new Set<ValueKind>(value.anyOf.flatMap(kindsOf))];
    if (value.type === "string" && !value.enum) return ["text"];
    if (value.type === "integer") return ["integer"];
    if (value.type === "number") return ["number"];
    if (value.type === "boolean") return ["boolean"];
    if (value.type === "array" && resolve(schema, value.items ?? {}).type === "string") return ["list"];
    return [];
  };
  const kinds = kindsOf(map.additionalProperties);
  return kinds.length ? kinds : null;
}

/** One form field per config property, the required ones first: its kind
 * from the type (a nullable type is its non-null part), enums as choices, a
 * list of texts one per line, a list of objects with named fields (cases,
 * metrics) item by item, a mapping with free keys row by row, the rest as YAML. */
export function fields(schema: Schema, config: any, depth = 0): Field[] {
  const required = new Set<string>(config?.required ?? []);
  const entries = Object.entries<any>(config?.properties ?? {});
  entries.sort(([a], [b]) => Number(required.has(b)) - Number(required.has(a)));
  return entries.map(([name, raw]) => {
    let prop = resolve(schema, raw);
    const options = (prop.anyOf ?? []).map((p: any) => resolve(schema, p))
      .filter((p: any) => p.type !== "null");
    if (options.length === 1) prop = { ...options[0], description: prop.description, default: prop.default };
    const description = String(prop.description ?? raw.description ?? "");
    const expression = /expression/i.test(description) && prop.type === "string";
    let kind: Field["kind"] = "yaml";
    let choices: string[] | undefined;
    if (Array.isArray(prop.enum)) { kind = "choice"; choices = prop.enum.map(String); }
    else if (prop.const !== undefined) { kind = "choice"; choices = [String(prop.const)]; }
    else if (prop.type === "string" || (prop.type === undefined && !prop.anyOf && !prop.properties)) {
      // a value of any type is most often a template (`{{search.results}}`); a
      // list or a mapping already there is edited as YAML (see FieldControl)
      kind = LONG.test(name) ? "long-text" : "text";
    }
    else if (prop.type === "integer") kind = "integer";
    else if (prop.type === "number") kind = "number";
    else if (prop.type === "boolean") kind = "boolean";
    let items: Field[] | undefined;
    if (prop.type === "array" && prop.items && depth === 0) {
      const item = resolve(schema, prop.items);
      if (item.type === "string" && !item.enum) kind = "lines";
      else if (item.type === "object" && item.properties) {
        kind = "list";
        items = fields(schema, item, depth + 1);
      }
    }
    const values = kind === "yaml" ? mapValues(schema, prop) ?? undefined : undefined;
    if (values) kind = "map";
    return { name, kind, choices, items, values, required: required.has(name), description,
             default: raw.default ?? prop.default, expression, prop: resolve(schema, raw) };
  });
}

/** Block type -> the output fields it declares (GET /api/block-outputs): what
 * `{{block.field}}` completes to, known for any document, valid or not. */
export type Outputs = Record<string, string[]>;

let outputsLoading: Promise<Outputs> | null = null;

export function loadOutputs(): Promise<Outputs> {
  outputsLoading ??= api<{ types: Record<string, { outputs: { name: string }[] }> }>("GET", "/api/block-outputs")
    .then((data) => Object.fromEntries(Object.entries(data.types)
      .map(([type, entry]) => [type, entry.outputs.map((o) => o.name)])))
    .catch((error) => { outputsLoading = null; throw error; });
  return outputsLoading;
}

const kindOf = (value: unknown) => value === null ? "null" : Array.isArray(value) ? "array"
  : Number.isInteger(value) ? "integer" : typeof value;
const article = (word: string) => (/^[aeiou]/.test(word) ? "an " : "a ") + word;

/** Why `value` does not have the shape `prop` asks for (type, list items,
 * required and unknown keys of a mapping, choices), or null: the first, located
 * (`metrics[0]: 'name' is missing`). A text holding `{{` fits anything (a
 * template, resolved at run time); the server's validation says the rest. */
export function shapeProblem(schema: Schema, raw: any, value: unknown, at = ""): string | null {
  const prop = resolve(schema, raw);
  if (!prop || typeof prop !== "object") return null;
  if (typeof value === "string" && value.includes("{{")) return null;
  const where = at ? `${at}: ` : "";
  const options = prop.anyOf ?? prop.oneOf;
  if (Array.isArray(options) && options.length) {
    const found = options.map((option: any) => shapeProblem(schema, option, value, at));
    if (found.some((problem: string | null) => problem === null)) return null;
    const kinds = options.map((option: any) => resolve(schema, option)?.type).filter(Boolean);
    const same = options.findIndex((option: any) => {
      const t = resolve(schema, option)?.type;
      return t === kindOf(value) || (t === "number" && kindOf(value) === "integer");
    });
    return same >= 0 ? found[same] : `${where}should be ${kinds.map(article).join(" or ")}, not ${article(kindOf(value))}`;
  }
  const kinds: string[] | null = Array.isArray(prop.type) ? prop.type : prop.type ? [prop.type] : null;
  const actual = kindOf(value);
  if (kinds && !kinds.some((t) => t === actual || (t === "number" && actual === "integer"))) {
    return `${where}should be ${kinds.map(article).join(" or ")}, not ${article(actual)}`;
  }
  if (Array.isArray(prop.enum) && !prop.enum.some((choice: unknown) => choice === value)) {
    return `${where}'${String(value)}' is not one of ${prop.enum.map(String).join(", ")}`;
  }
  if (Array.isArray(value)) {
    if (typeof prop.minItems === "number" && value.length < prop.minItems) {
      return `${where}needs at least ${prop.minItems} item${prop.minItems > 1 ? "s" : ""}`;
    }
    for (let index = 0; index < value.length && prop.items; index++) {
      const problem = shapeProblem(schema, prop.items, value[index], `${at}[${index}]`);
      if (problem) return problem;
    }
  } else if (value && typeof value === "object") {
    const entries = value as Record<string, unknown>;
    for (const key of prop.required ?? []) if (!(key in entries)) return `${where}'${key}' is missing`;
    // the keys only: a field's own value may take a seed system's form the
    // server converts (a metric's `range: {min, max}`), which a schema cannot tell
    const known = prop.properties ?? {};
    for (const key of Object.keys(entries)) {
      if (!(key in known) && prop.additionalProperties === false) {
        return `${where}unknown field '${key}'; the fields are ${Object.keys(known).join(", ")}`;
      }
    }
  }
  return null;
}
