// The graph laid out, and timed: from its data to the first frame painted with
// every block. The read-only graph and the editor's canvas both publish the
// figure as window.__ffGraph, which the browser tests and the 200-block
// measurement (tests/webapp/test_large_graph.py, bench/RESULTS.md) read.
import { useEffect, useMemo, useRef } from "react";
import { layout, type Placed, type WorkflowGraph } from "../layout";

declare global {
  interface Window { __ffGraph?: { nodes: number; layoutMs: number; renderMs: number } }
}

export function useTimedLayout(graph: WorkflowGraph,
                               adjust: (placed: Placed[]) => Placed[] = (placed) => placed,
                               extra: unknown = null): Placed[] {
  const started = useRef(0);
  const layoutMs = useRef(0);
  const placed = useMemo(() => {
    started.current = performance.now();
    const result = adjust(layout(graph));
    layoutMs.current = performance.now() - started.current;
    return result;
    // `adjust` reads `extra` (the canvas's own positions): it changes with it
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [graph, extra]);
  useEffect(() => {
    const frame = requestAnimationFrame(() => {
      window.__ffGraph = { nodes: placed.length, layoutMs: layoutMs.current,
                           renderMs: performance.now() - started.current };
    });
    return () => cancelAnimationFrame(frame);
  }, [placed]);
  return placed;
}
