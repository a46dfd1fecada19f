// A run, live: every block's state on the graph from the run's event stream
// (fetch-streamed SSE, so the key travels in a header), a side panel with the
// selected block's inputs, output, each model request exactly as sent and its
// response, tokens, cost and timing; a timeline; cancel.  A run that stops
// `waiting` (a wait or an approval block) marks those blocks on the graph; a
// waiting approval shows its message and data with Approve / Reject, and after
// the decision the view follows the resumed run's stream to its next stop.
// The graph is the one of the document the run ran (`/api/runs/{id}/graph`), so
// chat and research runs, whose workflows ship with the app, are drawn too,
// with the blocks where the author placed them in the editor (its `layout`).
// The events are folded into state by run/runState.ts; the timeline and the
// approval panel are run/Timeline.tsx and run/ApprovalPanel.tsx.
import { useEffect, useMemo, useRef, useState } from "react";
import { api, ApiError, followEvents, type RunEvent } from "../api";
import { Link } from "../router";
import { Graph } from "../components/Graph";
import { Json, StatusBadge } from "../components/Common";
import type { WorkflowGraph } from "../layout";
import { duration, formatTokens, when } from "../format";
import { apply, ENDED, fresh, settle, tokensOf, type Blocks } from "../run/runState";
import { Timeline } from "../run/Timeline";
import { ApprovalPanel } from "../run/ApprovalPanel";

/** `/api/runs/{id}/graph`: the graph of the document the run ran, the shipped
 * application it is of (if any), and the positions saved in the editor. */
type RunGraph = WorkflowGraph & { app?: string | null; layout?: Record<string, { x: number; y: number }> };

export function RunPage({ id }: { id: string }) {
  const [run, setRun] = useState<any>(null);
  const [graph, setGraph] = useState<RunGraph | null>(null);
  const [blocks, setBlocks] = useState<Blocks>({});
  const [status, setStatus] = useState<string>("");
  const [selected, setSelected] = useState<string | null>(null);
  const [missing, setMissing] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [eventCount, setEventCount] = useState(0);
  const [round, setRound] = useState(0);     // bumped by a decision: follow the stream again
  const [app, setApp] = useState<string | null>(null);   // the shipped app workflow it ran
  const live = useRef<Blocks>({});
  const last = useRef(0);

  async function refresh() {
    const detail = await api<any>("GET", `/api/runs/${encodeURIComponent(id)}`);
    setRun(detail);
    setStatus(detail.status);
    return detail;
  }

  useEffect(() => {
    const abort = new AbortController();
    (async () => {
      if (round === 0) {
        live.current = {};
        last.current = 0;
        let detail;
        try {
          detail = await refresh();
        } catch (err) {
          if ((err as ApiError).status === 404) setMissing((err as Error).message);
          else setError((err as Error).message);
          return;
        }
        try {
          const g = await api<RunGraph>(
            "GET", `/api/runs/${encodeURIComponent(id)}/graph`);
          setGraph(g);
          setApp(g.app ?? null);
          for (const node of g.nodes) live.current[node.id] ??= fresh();
        } catch (err) {
          setError(`the workflow's graph: ${(err as Error).message}`);
        }
      }
      let pending = false;
      let count = eventCount;
      const flush = () => {
        pending = false;
        setBlocks({ ...live.current });
        setEventCount(count);
      };
      // follow the stream; a connection cut before `run_finished` resumes after
      // the last event received, so none is lost or counted twice.  A run that
      // stops to wait ends its stream with `run_waiting`: go on past it while
      // the run has moved on since (decided here, elsewhere, or come due).
      let finished = false;
      for (let attempt = 0; !finished && !abort.signal.aborted && attempt < 20; attempt++) {
        try {
          let stopped = false;
          await followEvents(id, last.current, (event: RunEvent) => {
            if (event.seq <= last.current) return;
            last.current = event.seq;
            count += 1;
            apply(live.current, event);
            if (event.type === "run_finished" || event.type === "run_waiting") {
              stopped = true;
              setStatus(event.status ?? "finished");
            }
            if (!pending) { pending = true; requestAnimationFrame(flush); }
          }, abort.signal);
          if (stopped) {
            setError(null);
            const detail = await refresh();
            const more = await api<{ events: RunEvent[] }>(
              "GET", `/api/runs/${encodeURIComponent(id)}/events?after=${last.current}`);
            if (ENDED.has(detail.status) && !more.events.length) finished = true;
            else attempt = -1;        // the run went on (resumed): follow it
            continue;
          }
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
      const detail = await refresh().catch(() => null);
      if (detail) settle(live.current, detail);
      flush();
    })();
    return () => abort.abort();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [id, round]);

  // a run that waits for a decision opens the approval's panel
  useEffect(() => {
    if (status !== "waiting" || selected || !graph) return;
    const asking = graph.nodes.find((n) => n.type === "approval" && blocks[n.id]?.state === "waiting");
    if (asking) setSelected(asking.id);
  }, [status, graph, blocks]);

  const states = useMemo(() => Object.fromEntries(Object.entries(blocks).map(
    ([key, block]) => [key, { state: block.state, reason: block.reason }])), [blocks]);

  async function cancel() {
    try {
      const answer = await api<any>("POST", `/api/runs/${encodeURIComponent(id)}/cancel`);
      setStatus(answer.status);
      if (status !== "running") setRound((r) => r + 1);    // a waiting run: its last events
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
        {run && <span>of <Link to={app ? `/apps/${encodeURIComponent(app)}`
                                       : `/workflows/${encodeURIComponent(run.workflow_id)}`}>{run.workflow_id}</Link>
          {run.workflow_version ? ` (version ${run.workflow_version})` : app ? " (shipped with flowforge)" : ""}</span>}
        <span aria-label="Run status"><StatusBadge status={status || "..."} /></span>
        {["running", "queued", "waiting"].includes(status) &&
          <button type="button" onClick={cancel}>Cancel the run</button>}
        <span className="muted">{eventCount} events</span>
      </div>
      {error && <p role="alert" className="error">{error}</p>}
      {run?.error && <p className="error">{run.error}</p>}
      <div className="split">
        <section className="graph-pane" aria-label="Graph">
          {graph && <Graph graph={graph} states={states} selected={selected} onSelect={setSelected}
                                positions={graph.layout} />}
        </section>
        <section className="detail-pane" aria-label="Details">
          {chosen && selected ? (
            <aside className="block-panel" aria-label={`Block ${selected}`}>
              <h2>{graph?.nodes.find((n) => n.id === selected)?.name ?? selected}
                {" "}<StatusBadge status={chosen.state} /></h2>
              {chosen.reason && <p>Reason: {chosen.reason}</p>}
              {chosen.state === "waiting" && chosen.resumeAt ?
                <p>Resumes at {when(chosen.resumeAt)}.</p> : null}
              {graph?.nodes.find((n) => n.id === selected)?.type === "approval" &&
                <ApprovalPanel runId={id} blockId={selected} live={chosen} stored={stored}
                               runStatus={status}
                               onDecided={(answer) => { setStatus(answer.status); setRound((r) => r + 1); }}
                               onError={setError} />}
              {chosen.error && <p className="error">{chosen.error}</p>}
              <dl className="facts">
                <dt>Duration</dt><dd>{stored?.duration_ms != null ? `${Math.round(stored.duration_ms)} ms`
                  : chosen.started && chosen.finished ? duration(chosen.finished - chosen.started) : "-"}</dd>
                {chosen.passes.length > 1 && <><dt>Passes</dt><dd>{chosen.passes.length}</dd></>}
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
