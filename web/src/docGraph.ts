// The canvas's picture of the document, drawn from the editor's text as it
// is (valid or not, so a block just added shows at once): blocks, the edges
// the engine would draw (templates, `after:`, a condition's cases, an
// approval's `on_reject`, `on_error`) with each branch labelled, and the
// positions the author chose (`metadata.layout`).
import type { GraphEdge, GraphNode, WorkflowGraph } from "./layout";

const REFERENCE = /\{\{\s*([A-Za-z_][A-Za-z0-9_-]*)/g;
const IN_EXPRESSION = /(?<![\w.])([A-Za-z_][A-Za-z0-9_]*)\s*\./g;

/** The expressions of a block (a condition's `when`s, a loop's `until`, any
 * `{expr: ...}` value): the blocks they read are dependencies too. */
function expressions(spec: any): string[] {
  const found: string[] = [];
  const config = spec?.with ?? {};
  if (spec?.type === "condition" && Array.isArray(config.cases)) {
    for (const c of config.cases) if (typeof c?.when === "string") found.push(c.when);
  }
  if (typeof config.until === "string") found.push(config.until);
  const walk = (value: any) => {
    if (Array.isArray(value)) value.forEach(walk);
    else if (value && typeof value === "object") {
      if (typeof value.expr === "string" && Object.keys(value).length === 1) found.push(value.expr);
      else Object.values(value).forEach(walk);
    }
  };
  walk(config);
  return found;
}
const normalize = (name: string) => name.toLowerCase().replace(/[^a-z0-9_]/g, "");

export interface Position { x: number; y: number }

export function positions(document: any): Record<string, Position> {
  const layout = document?.metadata?.layout;
  const out: Record<string, Position> = {};
  if (layout && typeof layout === "object") {
    for (const [id, at] of Object.entries<any>(layout)) {
      if (at && Number.isFinite(at.x) && Number.isFinite(at.y)) out[id] = { x: at.x, y: at.y };
    }
  }
  return out;
}

function strings(value: unknown, found: string[] = []): string[] {
  if (typeof value === "string") found.push(value);
  else if (Array.isArray(value)) value.forEach((item) => strings(item, found));
  else if (value && typeof value === "object") Object.values(value).forEach((item) => strings(item, found));
  return found;
}

/** Labels of the branch edges `router` -> `target`, as the server draws them. */
export function branchLabel(router: any, target: any): string | undefined {
  const config = router?.with ?? {};
  if (router?.type === "condition") {
    const labels = (Array.isArray(config.cases) ? config.cases : [])
      .filter((c: any) => c && c.goto === target.id).map((c: any) => String(c.when ?? ""));
    if (config.default === target.id) labels.push("default");
    return labels.join(" | ") || (target.name ?? target.id);
  }
  if (router?.type === "approval") return config.on_reject === target.id ? "reject" : "approve";
  if (router?.type === "router") return target.name ?? target.id;
  return undefined;
}

export function graphOf(document: any): WorkflowGraph {
  const nodes: GraphNode[] = [];
  const edges: GraphEdge[] = [];
  const scope = (blocks: any[], parent: string | null) => {
    const specs = blocks.filter((b) => b && typeof b === "object" && typeof b.id === "string");
    const byName = new Map<string, any>();
    for (const spec of specs) {
      byName.set(spec.id, spec);
      if (typeof spec.name === "string") byName.set(normalize(spec.name), spec);
    }
    for (const spec of specs) {
      const type = typeof spec.type === "string" ? spec.type : spec.uses ? "registry" : "?";
      nodes.push({ id: spec.id, type, name: typeof spec.name === "string" ? spec.name : spec.id,
                   parent, container: Array.isArray(spec.blocks) || type === "loop" || type === "parallel",
                   description: typeof spec.description === "string" ? spec.description : undefined });
      if (Array.isArray(spec.blocks)) scope(spec.blocks, spec.id);
    }
    const seen = new Set<string>();
    const add = (source: any, target: any, kind: GraphEdge["kind"], label?: string) => {
      const id = `${source.id}->${target.id}`;
      if (source === target || seen.has(id)) return;
      seen.add(id);
      edges.push({ id, source: source.id, target: target.id, kind, label });
    };
    const routes = (spec: any) => ["condition", "approval", "router"].includes(spec.type);
    for (const spec of specs) {
      const sources = new Set<any>();
      for (const text of strings(spec.with)) {
        for (const match of text.matchAll(REFERENCE)) {
          const source = byName.get(match[1]) ?? byName.get(normalize(match[1]));
          if (source) sources.add(source);
        }
      }
      for (const text of expressions(spec)) {
        for (const match of text.matchAll(IN_EXPRESSION)) {
          if (byName.has(match[1]) && byName.get(match[1]) !== spec) sources.add(byName.get(match[1]));
        }
      }
      for (const name of Array.isArray(spec.after) ? spec.after : []) {
        if (byName.has(name)) sources.add(byName.get(name));
      }
      for (const source of sources) {
        add(source, spec, routes(source) ? "branch" : "data",
            routes(source) ? branchLabel(source, spec) : undefined);
      }
    }
    for (const spec of specs) {
      const config = spec.with ?? {};
      const targets: string[] = [];
      if (spec.type === "condition") {
        for (const c of Array.isArray(config.cases) ? config.cases : []) if (c?.goto) targets.push(c.goto);
        if (config.default) targets.push(config.default);
      }
      if (spec.type === "approval" && config.on_reject) targets.push(config.on_reject);
      for (const id of targets) {
        const target = byName.get(id);
        if (target) add(spec, target, "branch", branchLabel(spec, target));
      }
      const handler = typeof spec.on_error === "string" ? byName.get(spec.on_error) : null;
      if (handler) add(spec, handler, "error", "on error");
    }
  };
  scope(Array.isArray(document?.blocks) ? document.blocks : [], null);
  return { id: String(document?.id ?? ""), name: String(document?.name ?? document?.id ?? ""),
           nodes, edges };
}
