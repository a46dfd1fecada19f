// The run view's timeline: every block that ran, in order of its first start,
// one bar per pass (a block in a loop runs once per pass), on a time axis from
// the run's first start; beside each block its total time and number of passes.
import type { WorkflowGraph } from "../layout";
import { duration } from "../format";
import type { Blocks } from "./runState";

/** Tick marks for an axis of `span` seconds: about five, at round steps. */
function ticks(span: number): number[] {
  const rough = span / 5;
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 5, 10].map((f) => f * power).find((s) => s >= rough) ?? rough;
  const marks: number[] = [];
  for (let t = 0; t <= span + step * 1e-9; t += step) marks.push(t);
  return marks;
}

/** A tick's label: "0", "200 ms", "1 s" (no "1.00 s" on a round step). */
function tickLabel(seconds: number): string {
  return seconds === 0 ? "0" : duration(seconds).replace(/\.0+ /, " ");
}

export function Timeline({ blocks, graph, onSelect }: {
  blocks: Blocks; graph: WorkflowGraph | null; onSelect: (id: string) => void;
}) {
  const rows = Object.entries(blocks).filter(([, b]) => b.passes.length);
  if (!rows.length) return <p className="muted">Select a block to see its inputs, output and model calls.</p>;
  const now = Date.now() / 1000;
  const start = Math.min(...rows.map(([, b]) => b.passes[0].started));
  const end = Math.max(...rows.flatMap(([, b]) => b.passes.map((p) => p.finished ?? now)), start + 0.001);
  const span = end - start;
  const at = (time: number) => ((time - start) / span) * 100;
  const marks = ticks(span);
  return (
    <div className="timeline" aria-label="Timeline">
      <h2>Timeline</h2>
      <p className="muted">Select a block (on the graph or here) to see its details. The run took {duration(span)}.</p>
      <div className="timeline-axis" aria-hidden="true">
        <span />
        <span className="timeline-scale">
          {marks.map((t) => <span key={t} className="timeline-tick" style={{ left: `${(t / span) * 100}%` }}>
            {tickLabel(t)}</span>)}
        </span>
        <span />
      </div>
      {rows.sort((a, b) => a[1].passes[0].started - b[1].passes[0].started).map(([id, block]) => {
        const total = block.passes.reduce((sum, p) => sum + ((p.finished ?? now) - p.started), 0);
        const name = graph?.nodes.find((n) => n.id === id)?.name ?? id;
        const count = block.passes.length;
        const summary = `${duration(total)}${count > 1 ? ` in ${count} passes` : ""}`;
        return (
          <button type="button" key={id} className="timeline-row" data-timeline-block={id}
                  onClick={() => onSelect(id)}>
            <span className="timeline-name">{name}<span className="visually-hidden">, {block.state},</span></span>
            <span className="timeline-track">
              {block.passes.map((pass, i) => (
                <span key={i} className={`timeline-bar state-${pass.state}`} data-pass={i + 1}
                      title={`${count > 1 ? `pass ${i + 1}: ` : ""}${duration((pass.finished ?? now) - pass.started)}`}
                      style={{ left: `${at(pass.started)}%`,
                               width: `${Math.max(at(pass.finished ?? now) - at(pass.started), 0.4)}%` }} />
              ))}
            </span>
            <span className="timeline-duration">{summary}</span>
          </button>
        );
      })}
    </div>
  );
}
