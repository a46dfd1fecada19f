// The RAG chat (POST /api/chat/query): a conversation, the sources under each
// answer marked KB (a knowledge base) or Web, and the caller's sessions.
import { useEffect, useRef, useState } from "react";
import { api, ApiError } from "../api";
import { useCurrentEffect } from "../components/useCurrentEffect";
import { Link, navigate } from "../router";

interface Source { kind: string; title: string; url?: string | null; document_id?: string | null }
interface Message { role: string; content: string; sources?: Source[]; run_id?: string; kb?: string }
interface Session { session_id: string; title?: string; message_count?: number; updated_at?: string }

/** The knowledge base a session's last question named (the server keeps it too). */
function sessionBase(messages: Message[]): string {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i].kb) return messages[i].kb!;
  return "";
}

/** What went wrong, in the page's terms: the fields and pages of this app, not
 * the command line's (the API's messages are written for every client). */
function inTheseTerms(err: unknown, kb: string, bases: string[]): string {
  const message = (err as Error).message;
  const missing = /no (?:shared )?knowledge base named '([^']+)'/.exec(message);
  if ((err as ApiError).status === 404 && missing) {
    const known = bases.length ? ` Yours and the shared ones: ${bases.join(", ")}.`
      : " There is none yet: create one on the Knowledge page.";
    return kb ? `There is no knowledge base named '${missing[1]}'. Choose another in the ` +
      `Knowledge base field.${known}`
      : `The chat searches a knowledge base first, and the server's default ('${missing[1]}') ` +
        `does not exist. Name one in the Knowledge base field.${known}`;
  }
  if ((err as ApiError).status === 403) return `The server refused: ${message}`;
  return message;
}

export function Chat({ sessionId }: { sessionId: string | null }) {
  const [sessions, setSessions] = useState<Session[]>([]);
  const [messages, setMessages] = useState<Message[]>([]);
  const [question, setQuestion] = useState("");
  const [kb, setKb] = useState("");
  const [bases, setBases] = useState<string[]>([]);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  // the session this page just made by answering: already shown, not to be reloaded
  const made = useRef<string | null>(null);

  const loadSessions = () => api<{ sessions: Session[] }>("GET", "/api/chat/sessions")
    .then((data) => setSessions(data.sessions)).catch((err) => setError(err.message));
  useEffect(() => {
    loadSessions();
    api<{ knowledge_bases: { name: string }[] }>("GET", "/api/knowledge")
      .then((data) => setBases([...new Set(data.knowledge_bases.map((b) => b.name))]))
      .catch(() => undefined);
  }, []);
  useCurrentEffect((current) => {
    if (sessionId && sessionId === made.current) return;
    made.current = null;
    setMessages([]);
    setError(null);
    if (!sessionId) { setKb(""); return; }
    api<{ messages: Message[] }>("GET", `/api/chat/sessions/${encodeURIComponent(sessionId)}`)
      .then((data) => {
        if (!current()) return;
        setMessages(data.messages ?? []);
        setKb(sessionBase(data.messages ?? []));
      }).catch((err) => { if (current()) setError(err.message); });
  }, [sessionId]);

  async function ask(event: React.FormEvent) {
    event.preventDefault();
    if (!question.trim()) { setError("The question is empty: write one above Ask."); return; }
    setBusy(true);
    setError(null);
    const asked = question;
    const base = kb.trim();
    setMessages((list) => [...list, { role: "user", content: asked, ...(base ? { kb: base } : {}) }]);
    setQuestion("");
    try {
      const reply = await api<any>("POST", "/api/chat/query", { json: {
        query: asked, ...(sessionId ? { session_id: sessionId } : {}), ...(base ? { kb_id: base } : {}) } });
      setMessages((list) => [...list, { role: "assistant", content: reply.answer,
                                        sources: reply.sources, run_id: reply.run_id }]);
      if (reply.session_id !== sessionId) {
        made.current = reply.session_id;
        navigate(`/chat/${encodeURIComponent(reply.session_id)}`, true);
      }
      loadSessions();
    } catch (err) {
      // the question is not lost: it goes back in the box, to fix the base and ask again
      setMessages((list) => list.slice(0, -1));
      setQuestion(asked);
      setError(inTheseTerms(err, base, bases));
    } finally {
      setBusy(false);
    }
  }

  async function remove(id: string) {
    await api("DELETE", `/api/chat/sessions/${encodeURIComponent(id)}`).catch((err) => setError(err.message));
    if (id === sessionId) navigate("/chat");
    loadSessions();
  }

  return (
    <main className="chat-page">
      <h1>Chat</h1>
      <div className="chat">
        <nav className="sessions" aria-label="Sessions">
          <h2>Sessions</h2>
          <p><Link to="/chat">New conversation</Link></p>
          <ul>
            {sessions.map((s) => (
              <li key={s.session_id} className={s.session_id === sessionId ? "current" : ""}>
                <Link to={`/chat/${encodeURIComponent(s.session_id)}`}>{s.title || s.session_id}</Link>
                <span className="muted"> ({s.message_count ?? 0})</span>{" "}
                <button type="button" className="link" aria-label={`Delete session ${s.title || s.session_id}`}
                        onClick={() => remove(s.session_id)}>delete</button>
              </li>
            ))}
          </ul>
        </nav>
        <section className="conversation" aria-label="Conversation">
          <ol className="messages" aria-live="polite">
            {messages.map((m, i) => (
              <li key={i} className={`message ${m.role}`}>
                <strong>{m.role === "user" ? "You" : "Assistant"}</strong>
                <p>{m.content}</p>
                {m.sources && m.sources.length > 0 && (
                  <ul className="sources" aria-label="Sources">
                    {m.sources.map((s, j) => (
                      <li key={j}><span className={`badge source-${s.kind}`}>{s.kind === "kb" ? "KB" : "Web"}</span>{" "}
                        {s.url && /^https?:\/\//i.test(s.url) ? <a href={s.url} rel="noreferrer noopener" target="_blank">{s.title}</a> : s.title}</li>
                    ))}
                  </ul>
                )}
                {m.run_id && <Link to={`/runs/${m.run_id}`} className="muted">the run</Link>}
              </li>
            ))}
          </ol>
          {error && <p role="alert" className="error">{error}</p>}
          <form onSubmit={ask} className="ask">
            <label htmlFor="question">Your question</label>
            <textarea id="question" rows={3} value={question} onChange={(e) => setQuestion(e.target.value)} />
            <label htmlFor="kb">Knowledge base (optional)</label>
            <input id="kb" value={kb} list="kb-names" placeholder="the server's default"
                   aria-describedby="kb-note" onChange={(e) => setKb(e.target.value)} />
            <datalist id="kb-names">{bases.map((name) => <option key={name} value={name} />)}</datalist>
            <p id="kb-note" className="muted">{sessionId
              ? "This conversation keeps searching the base it started with, unless you name another."
              : <>Your bases and the shared ones are on the <Link to="/knowledge">Knowledge</Link> page.</>}</p>
            <button type="submit" disabled={busy}>{busy ? "Thinking..." : "Ask"}</button>
          </form>
        </section>
      </div>
    </main>
  );
}
