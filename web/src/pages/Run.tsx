// A run, live: every block's state on the graph from the run's event stream
// (fetch-streamed SSE, so the key travels in a header), a side panel with the
// selected block's inputs, output, each model request exactly as sent and its
// response, tokens, cost and timing; a timeline; cancel.  A run that stops
// `waiting` (a wait or an approval block) marks those blocks on the graph; a
// waiting approval shows its message and data with Approve / Reject, and after
// the decision the view follows the resumed run's stream to its next stop.
import { useEffect, useMemo, useRef, useState } from "react";
import { api, ApiError, followEvents, type RunEvent } from "../api";
import { Link } from "../router";
import { Graph, type BlockState } from "../components/Graph";
import { Json, StatusBadge } from "../components/Common";
import type { WorkflowGraph } from "../layout";

const STATE_OF: Record<string, BlockState> = {
  block_started: "running", block_succeeded: "succeeded", block_failed: "failed",
  block_skipped: "skipped", block_cancelled: "cancelled", block_waiting: "waiting",
};

/** Run statuses after which no event comes.  A `waiting` run is not one: the
 * view keeps following it, so a decision made elsewhere (another tab, the CLI)
 * or a wait that comes due shows up live. */
const ENDED = new Set(["succeeded", "failed", "cancelled"]);

interface Call { call: number; request?: any; response?: any; error?: string; model?: string; streamed: string }
interface Approval { message?: string; data?: unknown; timeout_at?: number | null }
interface Decided { decision?: string; by?: string | null; at?: string; comment?: string | null; timed_out?: boolean }
interface Live {
  state: BlockState; reason?: string; started?: number; finished?: number;
  output?: unknown; error?: string; calls: Call[]; approval?: Approval; decided?: Decided;
  resumeAt?: number | null;
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
  const [round, setRound] = useState(0);     // bumped by a decision: follow the stream again
  const live = useRef<Record<string, Live>>({});
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
          const g = await api<WorkflowGraph>("GET", `/api/workflows/${encodeURIComponent(
            detail.workflow_id)}/graph?${new URLSearchParams({
            ...(detail.workflow_version ? { version: String(detail.workflow_version) } : {}),
            ...(detail.user_id ? { owner: detail.user_id } : {}) })}`);
          setGraph(g);
          for (const node of g.nodes) live.current[node.id] ??= { state: "pending", calls: [] };
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
      // waited and was resumed has a `run_finished` per stop: go on past one
      // while the run has moved on since.
      let finished = false;
      for (let attempt = 0; !finished && !abort.signal.aborted && attempt < 20; attempt++) {
        try {
          let stopped = false;
          await followEvents(id, last.current, (event: RunEvent) => {
            if (event.seq <= last.current) return;
            last.current = event.seq;
            count += 1;
            apply(live.current, event);
            if (event.type === "run_finished") {
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
      flush();
      await refresh().catch(() => undefined);
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
        {run && <span>of <Link to={`/workflows/${encodeURIComponent(run.workflow_id)}`}>{run.workflow_id}</Link>
          {run.workflow_version ? ` (version ${run.workflow_version})` : ""}</span>}
        <span aria-label="Run status"><StatusBadge status={status || "..."} /></span>
        {["running", "queued", "waiting"].includes(status) &&
          <button type="button" onClick={cancel}>Cancel the run</button>}
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
              {chosen.state === "waiting" && chosen.resumeAt ?
                <p>Resumes at {new Date(chosen.resumeAt * 1000).toISOString()}.</p> : null}
              {graph?.nodes.find((n) => n.id === selected)?.type === "approval" &&
                <ApprovalPanel runId={id} blockId={selected} live={chosen} stored={stored}
                               runStatus={status}
                               onDecided={(answer) => { setStatus(answer.status); setRound((r) => r + 1); }}
                               onError={setError} />}
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
  if (event.type === "run_finished" && event.status === "cancelled") {
    // a run cancelled while it waited gets no block events: its waiting blocks end here
    for (const block of Object.values(blocks)) {
      if (block.state === "waiting") { block.state = "cancelled"; block.reason = "the run was cancelled"; }
    }
  }
  const id = event.block_id;
  if (!id) return;
  const block = (blocks[id] ??= { state: "pending", calls: [] });
  const state = STATE_OF[event.type];
  // blocks after a waiting one are skipped "for now": they run when it is resumed
  const after = /^waiting for '([^']+)'.*when the run is resumed/.exec(String(event.reason ?? ""));
  if (state === "skipped" && after) {
    block.state = "pending";
    block.reason = `after ${after[1]}`;
    return;
  }
  if (state) {
    block.state = state;
    if (event.type === "block_started") {
      block.started ??= event.time;
      block.reason = undefined;            // a block resumed after waiting starts afresh
      block.error = undefined;
    }
    else block.finished = event.time;
    if (event.reason) block.reason = String(event.reason);
    if (event.error) block.error = typeof event.error === "string" ? event.error : JSON.stringify(event.error);
    if ("output" in event) block.output = event.output;
    if (event.type === "block_waiting") block.resumeAt = event.resume_at ?? null;
    return;
  }
  if (event.type === "approval_requested") {
    block.approval = { message: event.message, data: event.data, timeout_at: event.timeout_at };
  } else if (event.type === "approval_decided") {
    block.decided = { decision: event.decision, by: event.by, at: event.at, comment: event.comment,
                      timed_out: event.timed_out };
  } else if (event.type === "llm_request") {
    block.calls = [...block.calls, { call: event.call, model: event.model, request: event.request, streamed: "" }];
  } else if (event.type === "llm_delta" || event.type === "llm_restart" || event.type === "llm_response") {
    const call = block.calls.find((c) => c.call === event.call) ?? block.calls[block.calls.length - 1];
    if (!call) return;
    if (event.type === "llm_delta") call.streamed += event.text ?? "";
    else if (event.type === "llm_restart") call.streamed = "";   // a cut stream: the answer starts again
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

/** An approval block: what is asked and the data to decide on; while the run
 * waits for it, Approve / Reject with a comment; once decided, who and why. */
function ApprovalPanel({ runId, blockId, live, stored, runStatus, onDecided, onError }: {
  runId: string; blockId: string; live: Live; stored: any; runStatus: string;
  onDecided: (answer: { status: string }) => void; onError: (message: string) => void;
}) {
  const [comment, setComment] = useState("");
  const [sending, setSending] = useState(false);
  const output = (stored?.output ?? live.output ?? {}) as any;
  const message = live.approval?.message ?? output.message;
  const data = live.approval?.data !== undefined ? live.approval.data : output.data;
  const decided: Decided | null = output.decision ? output : live.decided ?? null;
  const open = live.state === "waiting" && runStatus === "waiting" && !decided;

  async function decide(decision: "approve" | "reject") {
    setSending(true);
    try {
      const answer = await api<{ status: string }>(
        "POST", `/api/runs/${encodeURIComponent(runId)}/approvals/${encodeURIComponent(blockId)}`,
        { json: { decision, ...(comment.trim() ? { comment: comment.trim() } : {}) } });
      onDecided(answer);
    } catch (err) {
      onError((err as Error).message);
    } finally {
      setSending(false);
    }
  }

  return (
    <section className="approval" aria-label="Approval">
      <h3>Approval</h3>
      {message !== undefined && <p className="approval-message">{String(message)}</p>}
      {data !== undefined && data !== null && <Json label="Data to decide on" value={data} />}
      {live.approval?.timeout_at ? <p className="muted">Decided by default at{" "}
        {new Date(live.approval.timeout_at * 1000).toISOString()} if nobody decides.</p> : null}
      {decided && (
        <p className="decision" aria-label="Decision">
          <StatusBadge status={decided.decision === "approve" ? "approved" : "rejected"} />{" "}
          {decided.timed_out ? "by default (timed out)" : `by ${decided.by ?? "?"}`}
          {decided.at ? ` at ${decided.at}` : ""}
          {decided.comment ? <>: <q>{decided.comment}</q></> : null}
        </p>
      )}
      {open && (
        <form className="approval-form" onSubmit={(event) => event.preventDefault()}>
          <label htmlFor="approval-comment">Comment (optional)</label>
          <textarea id="approval-comment" rows={3} value={comment}
                    onChange={(event) => setComment(event.target.value)} />
          <div className="toolbar">
            <button type="button" disabled={sending} onClick={() => decide("approve")}>Approve</button>
            <button type="button" disabled={sending} className="danger"
                    onClick={() => decide("reject")}>Reject</button>
          </div>
        </form>
      )}
    </section>
  );
}
