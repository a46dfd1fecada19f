// The workflow as a graph: blocks laid out automatically (layout.ts), edges
// from the engine's compiler, branches labelled, containers around their
// children, each block coloured and labelled by its state during a run.
import { useEffect, useMemo, useRef } from "react";
import {
  Background, Controls, Handle, MarkerType, Position, ReactFlow,
  type Edge, type Node, type NodeProps,
} from "@xyflow/react";
import { type WorkflowGraph } from "../layout";
import { useTimedLayout } from "./timedLayout";
import { edgeTypes } from "./LabelledEdge";

/** A block's state in a run; `rejected` is an approval that settled with a
 * rejection (the engine says succeeded: the block did its job). */
export type BlockState = "pending" | "waiting" | "running" | "succeeded" | "failed" | "skipped" | "cancelled"
  | "rejected";

interface BlockData extends Record<string, unknown> {
  label: string;
  blockType: string;
  blockId: string;
  state?: BlockState;
  reason?: string;
  container: boolean;
  selected: boolean;
}

function BlockNode({ data }: NodeProps<Node<BlockData>>) {
  const state = data.state;
  return (
    <div className={`block ${data.container ? "container" : ""} state-${state ?? "none"}` +
                    (data.selected ? " chosen" : "")}
         data-block-id={data.blockId} data-state={state ?? ""}
         title={data.reason ? `${state}: ${data.reason}` : undefined}>
      <Handle type="target" position={Position.Top} isConnectable={false} />
      <div className="block-head">
        <span className="block-name">{data.label}</span>
        <span className="block-type">{data.blockType}</span>
      </div>
      {state && <div className="block-state">{state}{data.reason ? ` - ${data.reason}` : ""}</div>}
      <Handle type="source" position={Position.Bottom} isConnectable={false} />
    </div>
  );
}

const nodeTypes = { block: BlockNode };


export function Graph(props: {
  graph: WorkflowGraph;
  states?: Record<string, { state: BlockState; reason?: string }>;
  selected?: string | null;
  onSelect?: (id: string | null) => void;
  /** Where the author put blocks in the editor, by id (relative to a container, as saved). */
  positions?: Record<string, { x: number; y: number }>;
}) {
  const { graph, states, selected, onSelect, positions } = props;
  const placed = useTimedLayout(
    graph, (laid) => positions ? laid.map((p) => ({ ...p, ...(positions[p.node.id] ?? {}) })) : laid,
    positions ?? null);

  const nodes: Node<BlockData>[] = useMemo(() => placed.map(({ node, x, y, width, height }) => ({
    id: node.id,
    type: "block",
    position: { x, y },
    parentId: node.parent ?? undefined,
    extent: node.parent ? ("parent" as const) : undefined,
    draggable: false,
    connectable: false,
    selected: node.id === selected,
    ariaLabel: `${node.name} (${node.type})${states?.[node.id] ? `, ${states[node.id].state}` : ""}`,
    style: { width, height },
    // the layout fixes each block's size: saying so keeps React Flow from treating
    // the fresh node objects of every state change as unmeasured (hidden until a
    // re-measure that a quick second change can swallow)
    measured: { width, height },
    data: {
      label: node.name, blockType: node.type, blockId: node.id, container: node.container,
      state: states?.[node.id]?.state, reason: states?.[node.id]?.reason,
      selected: node.id === selected,
    },
  })), [placed, states, selected]);

  const edges: Edge[] = useMemo(() => graph.edges.map((edge) => ({
    id: edge.id,
    source: edge.source,
    target: edge.target,
    type: "labelled",
    label: edge.label,
    className: `edge-${edge.kind}`,
    animated: states?.[edge.source]?.state === "running",
    markerEnd: { type: MarkerType.ArrowClosed },
    style: edge.kind === "error" ? { strokeDasharray: "6 4", stroke: "#b42318" } : undefined,
    labelStyle: { fontSize: 12, fontWeight: 600 },
    labelBgStyle: { fill: "#fff8e1" },
    focusable: false,
  })), [graph, states]);

  return (
    <div className="graph" role="region" aria-label={`Graph of ${graph.name}`}>
      <ReactFlow nodes={nodes} edges={edges} nodeTypes={nodeTypes} edgeTypes={edgeTypes}
                 fitView fitViewOptions={{ maxZoom: 1 }} minZoom={0.05} nodesDraggable={false} nodesConnectable={false}
                 onNodeClick={(_, node) => onSelect?.(node.id)}
                 onPaneClick={() => onSelect?.(null)}
                 onNodesChange={(changes) => {
                   // keyboard selection (Tab to a block, Enter) arrives as a change
                   for (const change of changes) {
                     if (change.type === "select" && change.selected && change.id !== selected) {
                       onSelect?.(change.id);
                     }
                   }
                 }}
                 proOptions={{ hideAttribution: true }}>
        <Background />
        <Controls showInteractive={false} />
      </ReactFlow>
    </div>
  );
}
