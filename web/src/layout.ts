// Automatic layout of a workflow graph with dagre, top to bottom. Containers
// (loop, parallel) are laid out inside-out: each container's children first,
// so the container becomes one big node of its own scope.
import dagre from "@dagrejs/dagre";

export interface GraphNode {
  id: string;
  type: string;
  name: string;
  parent: string | null;
  container: boolean;
  description?: string;
  workflow?: string;
  where?: string;
}

export interface GraphEdge {
  id: string;
  source: string;
  target: string;
  kind: "data" | "branch" | "error";
  label?: string;
}

export interface WorkflowGraph {
  id: string;
  name: string;
  nodes: GraphNode[];
  edges: GraphEdge[];
  version?: number;
}

export interface Placed {
  node: GraphNode;
  x: number;           // relative to the parent container, as @xyflow/react wants
  y: number;
  width: number;
  height: number;
}

export const NODE_WIDTH = 190;
export const NODE_HEIGHT = 58;
const PAD = 24;
const HEADER = 54;

/** Positions for every node, parents before their children. */
export function layout(graph: WorkflowGraph): Placed[] {
  const byParent = new Map<string | null, GraphNode[]>();
  for (const node of graph.nodes) {
    const key = node.parent ?? null;
    byParent.set(key, [...(byParent.get(key) ?? []), node]);
  }
  const placed = new Map<string, Placed>();

  function scope(parent: string | null): { width: number; height: number } {
    const members = byParent.get(parent) ?? [];
    const g = new dagre.graphlib.Graph();
    g.setGraph({ rankdir: "TB", nodesep: 36, ranksep: 56, marginx: 0, marginy: 0 });
    g.setDefaultEdgeLabel(() => ({}));
    const sizes = new Map<string, { width: number; height: number }>();
    for (const node of members) {
      const size = node.container && byParent.has(node.id)
        ? scope(node.id)
        : { width: NODE_WIDTH, height: NODE_HEIGHT };
      sizes.set(node.id, size);
      g.setNode(node.id, { width: size.width, height: size.height });
    }
    const ids = new Set(members.map((node) => node.id));
    for (const edge of graph.edges) {
      if (ids.has(edge.source) && ids.has(edge.target)) g.setEdge(edge.source, edge.target);
    }
    dagre.layout(g);
    let width = 0;
    let height = 0;
    const offsetX = parent === null ? 0 : PAD;
    const offsetY = parent === null ? 0 : HEADER;
    for (const node of members) {
      const point = g.node(node.id);
      const size = sizes.get(node.id)!;
      const x = point.x - size.width / 2 + offsetX;
      const y = point.y - size.height / 2 + offsetY;
      placed.set(node.id, { node, x, y, width: size.width, height: size.height });
      width = Math.max(width, x + size.width);
      height = Math.max(height, y + size.height);
    }
    return { width: width + PAD, height: height + PAD };
  }

  scope(null);
  const ordered: Placed[] = [];
  const visit = (parent: string | null) => {
    for (const node of byParent.get(parent) ?? []) {
      ordered.push(placed.get(node.id)!);
      visit(node.id);
    }
  };
  visit(null);
  return ordered;
}
