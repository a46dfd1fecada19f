// The editable graph: blocks where the author put them (`metadata.layout`,
// else laid out automatically), connected by dragging from one block's handle
// to another's, deleted with Delete/Backspace, moved by dragging. It draws
// the editor's text and changes nothing itself: every action is handed to the
// page, which turns it into an edit of the text (yamlEdits.ts).
import { useEffect, useMemo, useRef, useState } from "react";
import {
  Background, Controls, Handle, MarkerType, MiniMap, Position, ReactFlow,
  type Edge, type Node, type NodeProps, type ReactFlowInstance, useUpdateNodeInternals,
} from "@xyflow/react";
import { type Placed, type WorkflowGraph } from "../layout";
import { useTimedLayout } from "./timedLayout";
import type { Position as At } from "../docGraph";
import { edgeTypes } from "./LabelledEdge";

interface BlockData extends Record<string, unknown> {
  label: string;
  blockType: string;
  blockId: string;
  container: boolean;
  selected: boolean;
  outlets: { id: string; label: string }[];
  problems: string[];
}

/** A block: one target handle on top; below, one source handle, or for a
 * condition one per case plus `default`, for an approval approve / reject. */
function BlockNode({ id, data }: NodeProps<Node<BlockData>>) {
  const outlets = data.outlets;
  // a case added or removed: React Flow measures the handles again, or the
  // edges from the new one would not be drawn
  const updateInternals = useUpdateNodeInternals();
  const shape = outlets.map((outlet) => outlet.id).join(" ");
  useEffect(() => updateInternals(id), [shape]);
  return (
    <div className={`block ${data.container ? "container" : ""} state-none` +
                    (data.selected ? " chosen" : "")}
         data-block-id={data.blockId} data-state="">
      <Handle type="target" position={Position.Top} title={`Into ${data.blockId}`} />
      <div className="block-head">
        <span className="block-name">{data.label}</span>
        <span className="block-type">{data.blockType}</span>
      </div>
      {data.problems.length > 0 && (
        <span className="block-problems" title={data.problems.join("\n")}>
          {data.problems.length} problem{data.problems.length > 1 ? "s" : ""}</span>
      )}
      {outlets.length === 0
        ? <Handle type="source" position={Position.Bottom} title={`Out of ${data.blockId}`} />
        : outlets.map((outlet, index) => (
          <Handle key={outlet.id} id={outlet.id} type="source" position={Position.Bottom}
                  className="outlet" title={`Out of ${data.blockId}: ${outlet.label}`}
                  data-outlet={outlet.id}
                  style={{ left: `${((index + 1) * 100) / (outlets.length + 1)}%` }} />
        ))}
    </div>
  );
}

const nodeTypes = { block: BlockNode };

function outletsOf(type: string, spec: any): { id: string; label: string }[] {
  if (type === "condition") {
    const cases = Array.isArray(spec?.with?.cases) ? spec.with.cases : [];
    return [...cases.map((c: any, i: number) => ({ id: `case-${i}`, label: `when ${c?.when ?? ""}` })),
            { id: "new-case", label: "new case" }, { id: "default", label: "default" }];
  }
  if (type === "approval") return [{ id: "approve", label: "approve" }, { id: "reject", label: "reject" }];
  return [];
}

/** Which outlet of a condition or approval an edge leaves from. */
function outletFor(type: string, spec: any, target: string): string | undefined {
  if (type === "condition") {
    const cases = Array.isArray(spec?.with?.cases) ? spec.with.cases : [];
    const index = cases.findIndex((c: any) => c?.goto === target);
    if (index >= 0) return `case-${index}`;
    return spec?.with?.default === target ? "default" : undefined;
  }
  if (type === "approval") return spec?.with?.on_reject === target ? "reject" : "approve";
  return undefined;
}


/** Containers grown to hold their children where the author put them
 * (children come after their parent: the innermost grow first). */
function enclose(placed: Placed[]): Placed[] {
  const byId = new Map(placed.map((p) => [p.node.id, { ...p }]));
  for (const p of [...byId.values()].reverse()) {
    const parent = p.node.parent ? byId.get(p.node.parent) : null;
    if (!parent) continue;
    parent.width = Math.max(parent.width, p.x + p.width + 24);
    parent.height = Math.max(parent.height, p.y + p.height + 24);
  }
  return placed.map((p) => byId.get(p.node.id)!);
}

export interface CanvasActions {
  onSelect: (id: string | null) => void;
  onSelectEdge: (edge: { source: string; target: string } | null) => void;
  onConnect: (source: string, target: string, handle: string | null) => void;
  onDelete: (blocks: string[], edges: { source: string; target: string }[]) => void;
  onMove: (id: string, at: At) => void;
  /** A block dropped onto a loop or parallel (`into`), or out of its own onto the top level (null). */
  onNest: (id: string, into: string | null, at: At) => void;
}

export function Canvas(props: {
  graph: WorkflowGraph;
  specs: Record<string, any>;
  positions: Record<string, At>;
  selected: string | null;
  selectedEdge: string | null;
  /** Block id -> the messages of the problems in it (a badge on the block). */
  problems?: Record<string, string[]>;
  /** Set to where the next block goes: beside `near` (the selected block)
   * where that is free, else the free spot below the lowest block. */
  nextSpot?: React.MutableRefObject<((near: string | null) => At) | null>;
} & CanvasActions) {
  const { graph, specs, positions, selected, selectedEdge } = props;
  const actions = useRef(props);
  actions.current = props;
  const [dragging, setDragging] = useState<Record<string, At>>({});

  const placed = useTimedLayout(
    graph, (laid) => enclose(laid.map((p) => ({ ...p, ...(positions[p.node.id] ?? {}) }))), positions);

  useEffect(() => setDragging({}), [positions]);
  const flow = useRef<ReactFlowInstance<Node<BlockData>, Edge> | null>(null);
  const count = useRef<number | null>(null);
  useEffect(() => {
    const top = placed.filter((p) => !p.node.parent);
    if (props.nextSpot) {
      props.nextSpot.current = (near) => {
        const chosen = near ? top.find((p) => p.node.id === near) : null;
        if (chosen) {
          const spot = { x: chosen.x + chosen.width + 50, y: chosen.y };
          const taken = (y: number) => top.some((p) => p.x < spot.x + chosen.width && p.x + p.width > spot.x &&
                                                    p.y < y + chosen.height && p.y + p.height > y);
          while (taken(spot.y)) spot.y += chosen.height + 30;
          return spot;
        }
        return top.length
          ? { x: Math.min(...top.map((p) => p.x)), y: Math.max(...top.map((p) => p.y + p.height)) + 50 }
          : { x: 0, y: 0 };
      };
    }
    // a block added or removed: everything in view again, the new block too
    if (count.current !== null && count.current !== placed.length) {
      requestAnimationFrame(() => flow.current?.fitView({ maxZoom: 1 }));
    }
    count.current = placed.length;
  }, [placed]);

  const nodes: Node<BlockData>[] = useMemo(() => placed.map(({ node, x, y, width, height }) => ({
    id: node.id,
    type: "block",
    position: dragging[node.id] ?? { x, y },
    parentId: node.parent ?? undefined,
    selected: node.id === selected,
    ariaLabel: `${node.name} (${node.type})` + ((props.problems?.[node.id]?.length ?? 0)
      ? `, ${props.problems![node.id].length} problem(s)` : ""),
    style: { width, height },
    measured: { width, height },
    data: {
      label: node.name, blockType: node.type, blockId: node.id, container: node.container,
      selected: node.id === selected, outlets: outletsOf(node.type, specs[node.id]),
      problems: props.problems?.[node.id] ?? [],
    },
  })), [placed, selected, dragging, specs, props.problems]);

  /** The edges on a cycle: those whose target leads back to their source. */
  const cyclic = useMemo(() => {
    const next = new Map<string, string[]>();
    for (const e of graph.edges) next.set(e.source, [...(next.get(e.source) ?? []), e.target]);
    const reaches = (from: string, to: string) => {
      const seen = new Set<string>([from]);
      const todo = [from];
      while (todo.length) {
        const at = todo.pop()!;
        if (at === to) return true;
        for (const n of next.get(at) ?? []) if (!seen.has(n)) { seen.add(n); todo.push(n); }
      }
      return false;
    };
    return new Set(graph.edges.filter((e) => reaches(e.target, e.source)).map((e) => e.id));
  }, [graph]);

  /** Where a dragged block's centre landed: the innermost container under it
   * (not itself nor one inside it), null for the open canvas; undefined when
   * React Flow cannot say. */
  function dropTarget(id: string): string | null | undefined {
    const instance = flow.current;
    const dragged = instance?.getInternalNode(id);
    if (!instance || !dragged) return undefined;
    const size = (n: any) => ({ w: n.measured?.width ?? n.width ?? 0, h: n.measured?.height ?? n.height ?? 0 });
    const at = dragged.internals.positionAbsolute;
    const cx = at.x + size(dragged).w / 2;
    const cy = at.y + size(dragged).h / 2;
    const inside = new Set([id]);
    for (let grew = true; grew;) {
      grew = false;
      for (const n of graph.nodes) if (n.parent && inside.has(n.parent) && !inside.has(n.id)) { inside.add(n.id); grew = true; }
    }
    let best: { id: string; area: number } | null = null;
    for (const n of graph.nodes) {
      if (!n.container || inside.has(n.id)) continue;
      const internal = instance.getInternalNode(n.id);
      if (!internal) continue;
      const p = internal.internals.positionAbsolute;
      const { w, h } = size(internal);
      if (cx >= p.x && cx <= p.x + w && cy >= p.y && cy <= p.y + h && (!best || w * h < best.area)) {
        best = { id: n.id, area: w * h };
      }
    }
    return best ? best.id : null;
  }

  const types = useMemo(() => new Map(graph.nodes.map((n) => [n.id, n.type])), [graph]);
  const edges: Edge[] = useMemo(() => graph.edges.map((edge) => ({
    id: edge.id,
    source: edge.source,
    sourceHandle: outletFor(types.get(edge.source) ?? "", specs[edge.source], edge.target),
    target: edge.target,
    type: "labelled",
    label: edge.label,
    selected: edge.id === selectedEdge,
    className: `edge-${edge.kind}${edge.id === selectedEdge ? " chosen" : ""}${cyclic.has(edge.id) ? " edge-cycle" : ""}`,
    markerEnd: { type: MarkerType.ArrowClosed, ...(cyclic.has(edge.id) ? { color: "#b42318" } : {}) },
    style: cyclic.has(edge.id) ? { stroke: "#b42318", strokeWidth: 2.5 }
      : edge.kind === "error" ? { strokeDasharray: "6 4", stroke: "#b42318" } : undefined,
    labelStyle: { fontSize: 12, fontWeight: 600 },
    labelBgStyle: { fill: "#fff8e1" },
    ariaLabel: `Edge from ${edge.source} to ${edge.target}${edge.label ? ` (${edge.label})` : ""}` +
      (cyclic.has(edge.id) ? ", part of a cycle" : ""),
    focusable: true,
    deletable: true,
  })), [graph, selectedEdge, specs, types, cyclic]);

  return (
    <div className="graph canvas" role="region" aria-label={`Canvas of ${graph.name || "the workflow"}`}>
      <ReactFlow nodes={nodes} edges={edges} nodeTypes={nodeTypes} edgeTypes={edgeTypes}
                 fitView fitViewOptions={{ maxZoom: 1 }} minZoom={0.05}
                 onInit={(instance) => { flow.current = instance; }}
                 nodesDraggable nodesConnectable elementsSelectable
                 deleteKeyCode={["Delete", "Backspace"]}
                 onNodeClick={(_, node) => actions.current.onSelect(node.id)}
                 onEdgeClick={(_, edge) => actions.current.onSelectEdge(
                   { source: edge.source, target: edge.target })}
                 onPaneClick={() => { actions.current.onSelect(null); actions.current.onSelectEdge(null); }}
                 onConnect={(connection) => {
                   if (connection.source && connection.target) {
                     actions.current.onConnect(connection.source, connection.target,
                                               connection.sourceHandle ?? null);
                   }
                 }}
                 onBeforeDelete={async ({ nodes: gone, edges: cut }) => {
                   // the text changes, and the canvas follows it: React Flow deletes nothing
                   const blocks = gone.map((n) => n.id);
                   actions.current.onDelete(blocks, cut
                     .filter((e) => !blocks.includes(e.source) && !blocks.includes(e.target))
                     .map((e) => ({ source: e.source, target: e.target })));
                   return false;
                 }}
                 onNodesChange={(changes) => {
                   for (const change of changes) {
                     if (change.type === "position" && change.position) {
                       const at = change.position;
                       setDragging((current) => ({ ...current, [change.id]: at }));
                     }
                     // keyboard selection (Tab to a block, Enter) arrives as a change
                     if (change.type === "select" && change.selected && change.id !== selected) {
                       actions.current.onSelect(change.id);
                     }
                   }
                 }}
                 onEdgesChange={(changes) => {
                   for (const change of changes) {
                     if (change.type === "select" && change.selected) {
                       const edge = graph.edges.find((e) => e.id === change.id);
                       if (edge) actions.current.onSelectEdge({ source: edge.source, target: edge.target });
                     }
                   }
                 }}
                 onNodeDragStop={(_, node) => {
                   const into = dropTarget(node.id);
                   const parent = graph.nodes.find((n) => n.id === node.id)?.parent ?? null;
                   if (into !== undefined && into !== parent) {
                     // where it was dropped, in its new frame (the container's, or the canvas's)
                     const at = flow.current!.getInternalNode(node.id)!.internals.positionAbsolute;
                     const frame = into ? flow.current!.getInternalNode(into)?.internals.positionAbsolute : null;
                     actions.current.onNest(node.id, into, frame ? { x: Math.max(at.x - frame.x, 8),
                                                                     y: Math.max(at.y - frame.y, 40) } : at);
                     return;
                   }
                   const moved = placed.find((p) => p.node.id === node.id);
                   if (moved && (Math.round(moved.x) !== Math.round(node.position.x) ||
                                 Math.round(moved.y) !== Math.round(node.position.y))) {
                     actions.current.onMove(node.id, node.position);
                   }
                 }}
                 proOptions={{ hideAttribution: true }}>
        <Background />
        <Controls showInteractive={false} />
        <MiniMap pannable zoomable ariaLabel="Minimap of the workflow" />
      </ReactFlow>
    </div>
  );
}
