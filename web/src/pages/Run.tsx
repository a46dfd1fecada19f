// A run, live: every block's state on the graph from the run's event stream
// (fetch-streamed SSE, so the key travels in a header), a side panel with the
// selected block's inputs, output, each model request exactly as sent and its
// response, tokens, cost and timing; a timeline; cancel.
import { useEffect, useMemo, useRef, useState } from "react";
import { api, ApiError, followEvents, type RunEvent } from "../api";
import { Link } from "../router";
import { Graph, type BlockState } from "../components/Graph";
import { Json, StatusBadge } from "../components/Common";
import type { WorkflowGraph } from "../layout";

const STATE_OF: Record<string, BlockState> = {
  block_started: "running", block_succeeded: "succeeded", block_failed: "failed",
  block_skipped: "skipped", block_cancelled: "cancelled",
};

interface Call { call: number; request?: any; response?: any; error?: string; model?: string; streamed: string }
interface Live {
  state: BlockState; reason?: string; started?: number; finished?: number;
  output?: unknown; error?: string; calls: Call[];
}

export function RunPage({ id }: { id: string }) {
  const [run, setRun] = useState<any>(null);
  const [graph, setGraph] = useState<WorkflowGraph | null>(null);
  const [blocks, setBlocks] = useState<Record<string, Live>>({});
  const [status, setStatus] = useState<string>("");
  const [selected, setSelected] = useState<string | null>(null);
  const [missing, setMissing] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [eventCount, setEventCount] = useState(0);
  const live = useRef<Record<string, Live>>({});

  async function refresh() {
    const detail = await api<any>("GET", `/api/runs/${encodeURIComponent(id)}`);
    setRun(detail);
    setStatus(detail.status);
    return detail;
  }

  useEffect(() => {
    const abort = new AbortController();
    live.current = {};
    (async () => {
      let detail;
      try {
        detail = await refresh();
      } catch (err) {
        if ((err as ApiError).status === 404) setMissing((err as Error).message);
        else setError((err as Error).message);
        return;
      }
      try {
        const g = await api<WorkflowGraph>("GET", `/api/workflows/${encodeURIComponent(
          detail.workflow_id)}/graph?${new URLSearchParams({
          ...(detail.workflow_version ? { version: String(detail.workflow_version) } : {}),
          ...(detail.user_id ? { owner: detail.user_id } : {}) })}`);
        setGraph(g);
        for (const node of g.nodes) live.current[node.id] ??= { state: "waiting", calls: [] };
      } catch (err) {
        setError(`the workflow's graph: ${(err as Error).message}`);
      }
      let pending = false;
      let count = 0;
      const flush = () => {
        pending = false;
        setBlocks({ ...live.current });
        setEventCount(count);
      };
      // follow the stream; a connection cut before `run_finished` resumes after
      // the last event received, so none is lost or counted twice
      let last = 0;
      let finished = false;
      for (let attempt = 0; !finished && !abort.signal.aborted && attempt < 20; attempt++) {
        try {
          await followEvents(id, last, (event: RunEvent) => {
            if (event.seq <= last) return;
            last = event.seq;
            count += 1;
            apply(live.current, event);
            if (event.type === "run_finished") {
              finished = true;
              setStatus(event.status ?? "finished");
            }
            if (!pending) { pending = true; requestAnimationFrame(flush); }
          }, abort.signal);
          if (finished) { setError(null); break; }
        } catch (err) {
          if (abort.signal.aborted) return;
          if ((err as ApiError).status) {        // the server refused: do not retry
            setError(`the event stream: ${(err as Error).message}`);
            return;
          }
          setError(`the event stream was cut (${(err as Error).message}); reconnecting...`);
        }
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
      if (abort.signal.aborted) return;
      flush();
      await refresh().catch(() => undefined);
    })();
    return () => abort.abort();
  }, [id]);

  const states = useMemo(() => Object.fromEntries(Object.entries(blocks).map(
    ([key, block]) => [key, { state: block.state, reason: block.reason }])), [blocks]);

  async function cancel() {
    try {
      const answer = await api<any>("POST", `/api/runs/${encodeURIComponent(id)}/cancel`);
      setStatus(answer.status);
    } catch (err) {
      setError((err as Error).message);
    }
  }

  if (missing) return <main><h1>Run not found</h1><p role="alert">{missing}</p>
    <p><Link to="/runs">All runs</Link></p></main>;
  const chosen = selected ? blocks[selected] : null;
  const stored = selected && run ? run.blocks?.[selected] : null;
  const usage = selected && run?.usage?.blocks ? run.usage.blocks[selected] : null;
  return (
    <main className="run-page">
      <div className="title-row">
        <h1>Run <code>{id.slice(0, 12)}</code></h1>
        {run && <span>of <Link to={`/workflows/${encodeURIComponent(run.workflow_id)}`}>{run.workflow_id}</Link>
          {run.workflow_version ? ` (version ${run.workflow_version})` : ""}</span>}
        <span aria-label="Run status"><StatusBadge status={status || "..."} /></span>
        {status === "running" && <button type="button" onClick={cancel}>Cancel the run</button>}
        <span className="muted">{eventCount} events</span>
      </div>
      {error && <p role="alert" className="error">{error}</p>}
      {run?.error && <p className="error">{run.error}</p>}
      <div className="split">
        <section className="graph-pane" aria-label="Graph">
          {graph && <Graph graph={graph} states={states} selected={selected} onSelect={setSelected} />}
        </section>
        <section className="detail-pane" aria-label="Details">
          {chosen && selected ? (
            <aside className="block-panel" aria-label={`Block ${selected}`}>
              <h2>{graph?.nodes.find((n) => n.id === selected)?.name ?? selected}
                {" "}<StatusBadge status={chosen.state} /></h2>
              {chosen.reason && <p>Reason: {chosen.reason}</p>}
              {chosen.error && <p className="error">{chosen.error}</p>}
              <dl className="facts">
                <dt>Duration</dt><dd>{stored?.duration_ms != null ? `${Math.round(stored.duration_ms)} ms`
                  : chosen.started && chosen.finished ? `${Math.round((chosen.finished - chosen.started) * 1000)} ms` : "-"}</dd>
                <dt>Tokens</dt><dd>{formatTokens(usage?.tokens) ?? tokensOf(chosen.calls) ?? "-"}</dd>
                <dt>Cost</dt><dd>{usage?.cost != null ? `$${Number(usage.cost).toFixed(6)}` : "-"}</dd>
              </dl>
              {stored?.inputs !== undefined && <><h3>Inputs</h3><Json label="Inputs" value={stored.inputs} /></>}
              <h3>Output</h3>
              <Json label="Output" value={stored?.output ?? chosen.output ?? null} />
              {chosen.calls.map((call) => (
                <div key={call.call} className="call">
                  <h3>Model call {call.call}{call.model ? ` (${call.model})` : ""}</h3>
                  <h4>Request, as sent</h4>
                  <Json label={`Request ${call.call}`} value={call.request ?? null} />
                  {call.streamed && !call.response && <><h4>Streaming</h4><Json label="Streamed text" value={call.streamed} /></>}
                  <h4>Response</h4>
                  <Json label={`Response ${call.call}`} value={call.error ?? call.response ?? "(waiting)"} />
                </div>
              ))}
              <button type="button" onClick={() => setSelected(null)}>Close</button>
            </aside>
          ) : (
            <Timeline blocks={blocks} graph={graph} onSelect={setSelected} />
          )}
        </section>
      </div>
    </main>
  );
}

function formatTokens(tokens: any): string | null {
  if (tokens == null) return null;
  if (typeof tokens !== "object") return String(tokens);
  const total = tokens.total ?? tokens.total_tokens;
  const parts = Object.entries(tokens).filter(([key]) => !key.startsWith("total"))
    .map(([key, value]) => `${key} ${value}`);
  return `${total ?? "?"}${parts.length ? ` (${parts.join(", ")})` : ""}`;
}

function tokensOf(calls: Call[]): string | null {
  let total = 0;
  for (const call of calls) {
    const usage = call.response?.usage ?? {};
    total += Number(usage.total ?? usage.total_tokens ?? 0);
  }
  return total ? String(total) : null;
}

function apply(blocks: Record<string, Live>, event: RunEvent): void {
  const id = event.block_id;
  if (!id) return;
  const block = (blocks[id] ??= { state: "waiting", calls: [] });
  const state = STATE_OF[event.type];
  if (state) {
    block.state = state;
    if (event.type === "block_started") block.started ??= event.time;
    else block.finished = event.time;
    if (event.reason) block.reason = String(event.reason);
    if (event.error) block.error = typeof event.error === "string" ? event.error : JSON.stringify(event.error);
    if ("output" in event) block.output = event.output;
    return;
  }
  if (event.type === "llm_request") {
    block.calls = [...block.calls, { call: event.call, model: event.model, request: event.request, streamed: "" }];
  } else if (event.type === "llm_delta" || event.type === "llm_response") {
    const call = block.calls.find((c) => c.call === event.call) ?? block.calls[block.calls.length - 1];
    if (!call) return;
    if (event.type === "llm_delta") call.streamed += event.text ?? "";
    else { call.response = event.response; call.error = event.error; }
    block.calls = [...block.calls];
  }
}

function Timeline({ blocks, graph, onSelect }: {
  blocks: Record<string, Live>; graph: WorkflowGraph | null; onSelect: (id: string) => void;
}) {
  const rows = Object.entries(blocks).filter(([, b]) => b.started);
  if (!rows.length) return <p className="muted">Select a block to see its inputs, output and model calls.</p>;
  const start = Math.min(...rows.map(([, b]) => b.started!));
  const end = Math.max(...rows.map(([, b]) => b.finished ?? Date.now() / 1000), start + 0.001);
  return (
    <div className="timeline" aria-label="Timeline">
      <h2>Timeline</h2>
      <p className="muted">Select a block (on the graph or here) to see its details.</p>
      {rows.sort((a, b) => a[1].started! - b[1].started!).map(([id, block]) => {
        const left = ((block.started! - start) / (end - start)) * 100;
        const width = Math.max((((block.finished ?? end) - block.started!) / (end - start)) * 100, 0.5);
        return (
          <button type="button" key={id} className="timeline-row" onClick={() => onSelect(id)}>
            <span className="timeline-name">{graph?.nodes.find((n) => n.id === id)?.name ?? id}</span>
            <span className="timeline-track">
              <span className={`timeline-bar state-${block.state}`} style={{ left: `${left}%`, width: `${width}%` }} />
            </span>
          </button>
        );
      })}
    </div>
  );
}
