// A run, live: every block's state on the graph from the run's event stream
// (fetch-streamed SSE, so the key travels in a header), a side panel with the
// selected block's inputs, output, each model request exactly as sent and its
// response, tokens, cost and timing; a timeline; cancel.  A run that stops
// `waiting` (a wait or an approval block) marks those blocks on the graph; a
// waiting approval shows its message and data with Approve / Reject, and after
// the decision the view follows the resumed run's stream to its next stop.
// The graph is the one of the document the run ran (`/api/runs/{id}/graph`), so
// chat and research runs, whose workflows ship with the app, are drawn too.
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
interface Approval { message?: string; data?: unknown; timeout_at?: number | null; default?: string | null }
interface Decided { decision?: string; by?: string | null; at?: string; comment?: string | null; timed_out?: boolean }
/** One run of a block: a block inside a loop or a map runs once per pass (its scope). */
interface Pass { scope: string | null; started: number; finished?: number; state: BlockState }
interface Live {
  state: BlockState; reason?: string; started?: number; finished?: number;
  output?: unknown; error?: string; calls: Call[]; approval?: Approval; decided?: Decided;
  resumeAt?: number | null; passes: Pass[];
}

const fresh = (): Live => ({ state: "pending", calls: [], passes: [] });

/** A moment as a reader of this page reads it: local date and time, to the second. */
export function when(moment: number | string | null | undefined): string {
  if (moment == null || moment === "") return "-";
  const date = typeof moment === "number" ? new Date(moment * 1000) : new Date(moment);
  if (Number.isNaN(date.getTime())) return String(moment);
  return date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" });
}

/** A duration in seconds: "0.4 ms", "120 ms", "3.2 s", "2 min 5 s". */
export function duration(seconds: number): string {
  const ms = seconds * 1000;
  if (ms < 10) return `${ms.toFixed(1)} ms`;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 2 : 1)} s`;
  return `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;
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
  const [app, setApp] = useState<string | null>(null);   // the shipped app workflow it ran
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
          const g = await api<WorkflowGraph & { app?: string | null }>(
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
          {graph && <Graph graph={graph} states={states} selected={selected} onSelect={setSelected} />}
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

/** Blocks held "pending" behind a waiting one, once the run ends without resuming:
 * they will not run, and the API says skipped. */
function release(blocks: Record<string, Live>, status: string): void {
  for (const block of Object.values(blocks)) {
    if (block.state === "pending" && block.reason?.startsWith("after ")) {
      block.state = "skipped";
      block.reason = `the run ended ${status} before ${block.reason.slice(6)} was decided`;
    }
  }
}

/** The stored record has the last word on an ended run's blocks the stream left
 * pending or waiting (a run cancelled while it waited emits no block events). */
function settle(blocks: Record<string, Live>, detail: any): void {
  if (!ENDED.has(detail.status)) return;
  for (const [id, stored] of Object.entries<any>(detail.blocks ?? {})) {
    const block = blocks[id];
    const state = stored?.status as BlockState | undefined;
    if (block && state && state !== block.state && (block.state === "pending" || block.state === "waiting")) {
      block.state = state;
      if (stored.reason) block.reason = String(stored.reason);
    }
  }
}

function apply(blocks: Record<string, Live>, event: RunEvent): void {
  if (event.type === "run_finished" && event.status === "cancelled") {
    // a run cancelled while it waited gets no block events: its waiting blocks end here
    for (const block of Object.values(blocks)) {
      if (block.state === "waiting") { block.state = "cancelled"; block.reason = "the run was cancelled"; }
    }
  }
  if (event.type === "run_finished" && event.status) {
    release(blocks, event.status);
  }
  if (event.type === "run_waiting") {
    // the blocks held behind a waiting one, by id: they run when it is resumed
    for (const [held, waitingFor] of Object.entries<string>(event.pending ?? {})) {
      const block = (blocks[held] ??= fresh());
      block.state = "pending";
      block.reason = `after ${waitingFor}`;
    }
    return;
  }
  const id = event.block_id;
  if (!id) return;
  const block = (blocks[id] ??= fresh());
  const state = STATE_OF[event.type];
  if (state) {
    block.state = state;
    const scope = event.scope ?? null;
    if (event.type === "block_started") {
      block.started ??= event.time;
      block.reason = undefined;            // a block resumed after waiting starts afresh
      block.error = undefined;
      block.passes = [...block.passes, { scope, started: event.time, state }];
    }
    else {
      block.finished = event.time;
      const open = [...block.passes].reverse().find((p) => p.scope === scope && p.finished === undefined);
      if (open) { open.finished = event.time; open.state = state; block.passes = [...block.passes]; }
    }
    if (event.reason) block.reason = String(event.reason);
    if (event.error) block.error = typeof event.error === "string" ? event.error : JSON.stringify(event.error);
    if ("output" in event) block.output = event.output;
    if (event.type === "block_waiting") block.resumeAt = event.resume_at ?? null;
    return;
  }
  if (event.type === "approval_requested") {
    block.approval = { message: event.message, data: event.data, timeout_at: event.timeout_at,
                       default: event.default };
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

/** Tick marks for an axis of `span` seconds: about five, at round steps. */
function ticks(span: number): number[] {
  const rough = span / 5;
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 5, 10].map((f) => f * power).find((s) => s >= rough) ?? rough;
  const marks: number[] = [];
  for (let t = 0; t <= span + step * 1e-9; t += step) marks.push(t);
  return marks;
}

/** Every block that ran, in order of its first start, one bar per pass (a block
 * in a loop runs once per pass), on a time axis from the run's first start;
 * beside each block its total time and number of passes. */
function Timeline({ blocks, graph, onSelect }: {
  blocks: Record<string, Live>; graph: WorkflowGraph | null; onSelect: (id: string) => void;
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
            {t === 0 ? "0" : duration(t).replace(/\.0+ /, " ")}</span>)}
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
      {!decided && live.approval?.timeout_at ? <p className="muted deadline">If nobody decides by{" "}
        {when(live.approval.timeout_at)}, {live.approval.default
          ? `it is ${live.approval.default === "approve" ? "approved" : "rejected"} by default`
          : "the block fails"}.</p> : null}
      {decided && (
        <p className="decision" aria-label="Decision">
          <StatusBadge status={decided.decision === "approve" ? "approved" : "rejected"} />{" "}
          {decided.timed_out ? "by default (nobody decided in time)" : `by ${decided.by ?? "?"}`}
          {decided.at ? `, ${when(decided.at)}` : ""}
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
