// Research (POST /agent-workflow {question, ...}): the orchestrator's three
// phases - question, knowledge base, answer - with the overall progress and
// each phase's result as it completes, followed over the session's WebSocket
// (status / phase / complete / error events; the key travels as the subprotocol
// `bearer.<key>` beside `flowforge`, never in the URL, which servers and proxies
// log); cancel through the session's cancel_url.
// A session has its own address (/research/{id}): a reload replays it.
import { useEffect, useRef, useState } from "react";
import { api, apiKey } from "../api";
import { formError } from "../errors";
import { Link, navigate } from "../router";
import { Json, StatusBadge } from "../components/Common";

const PHASES = [
  { id: "question", title: "Question", what: "improves the question until it is clear and answerable" },
  { id: "knowledge", title: "Knowledge base", what: "searches and builds a knowledge base for it" },
  { id: "answer", title: "Answer", what: "drafts and refines the answer from that knowledge" },
] as const;

interface Phase {
  status: string;                  // pending, started, completed, failed, cancelled
  result?: unknown; message?: string; step?: string; iteration?: number | null;
  scores: { iteration: number; score: number; name?: string; feedback?: string }[];
}
interface Session { status: string; progress: number; phases: Record<string, Phase>;
                    answer?: unknown; error?: string }

const fresh = (): Session => ({ status: "starting", progress: 0,
  phases: Object.fromEntries(PHASES.map((p) => [p.id, { status: "pending", scores: [] }])) });

/** The server's limit on each phase's passes (routes/compat.py, `max_iterations`). */
const MAX_ITERATIONS = 10;
const LABELS = { question: "Question", threshold: "Confidence threshold",
                 max_iterations: "Maximum iterations", kb: "Knowledge base" };

/** Said before the request, in the form's words: what the server would refuse. */
function checkNumbers(threshold: string, iterations: string): string | null {
  if (threshold.trim()) {
    const value = Number(threshold);
    if (!Number.isFinite(value) || value < 0 || value > 1) {
      return `Confidence threshold: ${threshold} is not between 0 and 1 (for example 0.8 or 0.99).`;
    }
  }
  if (iterations.trim()) {
    const value = Number(iterations);
    if (!Number.isInteger(value) || value < 1 || value > MAX_ITERATIONS) {
      return `Maximum iterations: ${iterations} is not a whole number from 1 to ${MAX_ITERATIONS}.`;
    }
  }
  return null;
}

export function Research({ sessionId }: { sessionId: string | null }) {
  const [question, setQuestion] = useState("");
  const [threshold, setThreshold] = useState("");
  const [iterations, setIterations] = useState("");
  const [kb, setKb] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);

  async function start(event: React.FormEvent) {
    event.preventDefault();
    if (!question.trim()) { setError("Question: it is empty. Ask something."); return; }
    const problem = checkNumbers(threshold, iterations);
    if (problem) { setError(problem); return; }
    setBusy(true);
    setError(null);
    try {
      const session = await api<{ session_id: string }>("POST", "/agent-workflow", { json: {
        question: question.trim(),
        ...(threshold.trim() ? { threshold: Number(threshold) } : {}),
        ...(iterations.trim() ? { max_iterations: Number(iterations) } : {}),
        ...(kb.trim() ? { kb: kb.trim() } : {}) } });
      navigate(`/research/${encodeURIComponent(session.session_id)}`);
    } catch (err) {
      setError(formError(err, LABELS));
    } finally {
      setBusy(false);
    }
  }

  return (
    <main className="research">
      <h1>Research</h1>
      <p className="muted">Three phases, each repeated until its confidence reaches the threshold
        or the maximum of iterations: {PHASES.map((p) => `${p.title.toLowerCase()} (${p.what})`).join("; ")}.</p>
      <form className="run-form" onSubmit={start} aria-label="New research" noValidate>
        <div className="field">
          <label htmlFor="research-question">Question</label>
          <textarea id="research-question" rows={3} value={question}
                    onChange={(e) => setQuestion(e.target.value)} />
        </div>
        <div className="toolbar">
          <label htmlFor="research-threshold">Confidence threshold (0-1)</label>
          <input id="research-threshold" type="number" min={0} max={1} step={0.01} placeholder="0.8"
                 value={threshold} onChange={(e) => setThreshold(e.target.value)} />
          <label htmlFor="research-iterations">Maximum iterations (1-{MAX_ITERATIONS})</label>
          <input id="research-iterations" type="number" min={1} max={MAX_ITERATIONS} step={1} placeholder="3"
                 value={iterations} onChange={(e) => setIterations(e.target.value)} />
          <label htmlFor="research-kb">Knowledge base (optional)</label>
          <input id="research-kb" value={kb} onChange={(e) => setKb(e.target.value)} />
        </div>
        <div><button type="submit" disabled={busy}>Start research</button></div>
      </form>
      {error && <p role="alert" className="error">{error}</p>}
      {sessionId && <SessionView key={sessionId} id={sessionId} />}
    </main>
  );
}

function SessionView({ id }: { id: string }) {
  const [session, setSession] = useState<Session>(fresh);
  const [error, setError] = useState<string | null>(null);
  const state = useRef<Session>(fresh());

  useEffect(() => {
    state.current = fresh();
    setSession(state.current);
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}/ws/agent-workflow/${
      encodeURIComponent(id)}`, ["flowforge", `bearer.${apiKey() ?? ""}`]);
    let ended = false;
    socket.onmessage = (message) => {
      let event: any;
      try { event = JSON.parse(message.data); } catch { return; }
      const next = apply(state.current, event);
      if (["succeeded", "failed", "cancelled", "interrupted", "stream_failed"].includes(next.status)) ended = true;
      state.current = next;
      setSession(next);
    };
    socket.onclose = (close) => {
      if (!ended && close.code !== 1000) {
        setError(`the session's progress stream closed (${close.code}${close.reason ? `: ${close.reason}` : ""})`);
      }
    };
    return () => { ended = true; socket.close(); };
  }, [id]);

  async function cancel() {
    try {
      const answer = await api<{ status: string }>(
        "POST", `/agent-workflow/${encodeURIComponent(id)}/cancel`);
      if (answer.status === "cancelled" && state.current.status !== "cancelled") {
        state.current = { ...state.current, status: "cancelled" };
        setSession(state.current);
      }
    } catch (err) {
      setError((err as Error).message);
    }
  }

  const running = session.status === "running" || session.status === "starting";
  return (
    <section className="research-session" aria-label="Research session">
      <div className="title-row">
        <h2>Session <code>{id.slice(0, 12)}</code></h2>
        <span aria-label="Session status"><StatusBadge status={session.status} /></span>
        {running && <button type="button" className="danger" onClick={cancel}>Cancel the research</button>}
        <Link to={`/runs/${encodeURIComponent(id)}`}>Its run, block by block</Link>
      </div>
      <div className="research-progress">
        <progress id="research-progress" max={100} value={session.progress}
                  aria-label="Research progress" data-progress={session.progress} />
        <span aria-hidden="true">{session.progress}%</span>
      </div>
      {error && <p role="alert" className="error">{error}</p>}
      {session.error && <p role="alert" className="error">{session.error}</p>}
      <ol className="phases">
        {PHASES.map((phase) => {
          const p = session.phases[phase.id];
          return (
            <li key={phase.id} className={`phase phase-${p.status}`} data-phase={phase.id}
                data-status={p.status}>
              <section aria-label={`Phase ${phase.title}`}>
                <h3>{phase.title} <StatusBadge status={p.status} /></h3>
                <p className="muted">The orchestrator {phase.what}.</p>
                {p.status === "started" && p.step && <p>Pass {p.iteration ?? "-"}: {p.step}</p>}
                {p.scores.length > 0 && (
                  <ul className="scores">
                    {p.scores.map((s) => <li key={s.iteration}>Pass {s.iteration}: {s.name ?? "score"}{" "}
                      {s.score.toFixed(2)}{s.feedback ? ` - ${s.feedback}` : ""}</li>)}
                  </ul>
                )}
                {p.message && <p>{p.message}</p>}
                {p.result !== undefined && <Json label={`${phase.title} result`} value={p.result} />}
              </section>
            </li>
          );
        })}
      </ol>
      {session.answer !== undefined && (
        <section aria-label="Answer">
          <h2>Answer</h2>
          <AnswerText answer={session.answer} />
          <Json label="Final answer" value={session.answer} />
        </section>
      )}
    </section>
  );
}

/** The session after one WebSocket event (a new object: React sees the change). */
function apply(current: Session, event: any): Session {
  const next: Session = { ...current, phases: { ...current.phases } };
  if (typeof event.progress === "number") next.progress = event.progress;
  const phase = event.phase && next.phases[event.phase]
    ? (next.phases[event.phase] = { ...next.phases[event.phase] }) : null;
  if (event.type === "phase" && phase) {
    phase.status = event.status;
    if (event.status === "completed") {
      phase.result = event.result;
      phase.message = event.message ?? undefined;
      phase.step = undefined;
    }
    next.status = "running";
  } else if (event.type === "status") {
    next.status = event.status;
    if (phase && event.status === "running") {
      if (phase.status === "pending") phase.status = "started";
      phase.step = event.step;
      phase.iteration = event.iteration;
      if (typeof event.score === "number" && event.iteration != null) {
        phase.scores = [...phase.scores.filter((s) => s.iteration !== event.iteration),
          { iteration: event.iteration, score: event.score, name: event.score_name, feedback: event.feedback }];
      }
    }
    if (event.status === "cancelled") {
      for (const [name, p] of Object.entries(next.phases)) {
        if (p.status === "started") next.phases[name] = { ...p, status: "cancelled", step: undefined };
      }
    }
  } else if (event.type === "complete") {
    next.status = "succeeded";
    next.progress = 100;
    next.answer = event.result;
  } else if (event.type === "error") {
    next.status = event.status ?? "failed";
    next.error = event.error?.message ?? "the session failed";
    if (phase && phase.status !== "completed") phase.status = "failed";
  }
  return next;
}

/** The answer's text and its sources, when the report has them. */
function AnswerText({ answer }: { answer: unknown }) {
  const report = (answer && typeof answer === "object" ? answer : {}) as
    { answer?: unknown; sources?: unknown };
  if (typeof report.answer !== "string") return null;
  const sources = Array.isArray(report.sources) ? report.sources.map(String) : [];
  return (
    <div className="answer-text">
      <p>{report.answer}</p>
      {sources.length > 0 && <>
        <h3>Sources</h3>
        <ul aria-label="Sources">{sources.map((source) => <li key={source}>
          {/^https?:\/\//.test(source)
            ? <a href={source} rel="noreferrer noopener" target="_blank">{source}</a> : source}</li>)}
        </ul>
      </>}
    </div>
  );
}
