// The RAG chat (POST /api/chat/query): a conversation, the sources under each
// answer marked KB (a knowledge base) or Web, and the caller's sessions.
import { useEffect, useState } from "react";
import { api } from "../api";
import { Link, navigate } from "../router";

interface Source { kind: string; title: string; url?: string | null; document_id?: string | null }
interface Message { role: string; content: string; sources?: Source[]; run_id?: string }
interface Session { session_id: string; title?: string; message_count?: number; updated_at?: string }

export function Chat({ sessionId }: { sessionId: string | null }) {
  const [sessions, setSessions] = useState<Session[]>([]);
  const [messages, setMessages] = useState<Message[]>([]);
  const [question, setQuestion] = useState("");
  const [kb, setKb] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);

  const loadSessions = () => api<{ sessions: Session[] }>("GET", "/api/chat/sessions")
    .then((data) => setSessions(data.sessions)).catch((err) => setError(err.message));
  useEffect(() => { loadSessions(); }, []);
  useEffect(() => {
    setMessages([]);
    if (!sessionId) return;
    api<{ messages: Message[] }>("GET", `/api/chat/sessions/${encodeURIComponent(sessionId)}`)
      .then((data) => setMessages(data.messages ?? [])).catch((err) => setError(err.message));
  }, [sessionId]);

  async function ask(event: React.FormEvent) {
    event.preventDefault();
    if (!question.trim()) return;
    setBusy(true);
    setError(null);
    const asked = question;
    setMessages((list) => [...list, { role: "user", content: asked }]);
    setQuestion("");
    try {
      const reply = await api<any>("POST", "/api/chat/query", { json: {
        query: asked, ...(sessionId ? { session_id: sessionId } : {}), ...(kb.trim() ? { kb_id: kb.trim() } : {}) } });
      setMessages((list) => [...list, { role: "assistant", content: reply.answer,
                                        sources: reply.sources, run_id: reply.run_id }]);
      if (reply.session_id !== sessionId) navigate(`/chat/${encodeURIComponent(reply.session_id)}`, true);
      loadSessions();
    } catch (err) {
      setError((err as Error).message);
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
            <input id="kb" value={kb} placeholder="the server's default" onChange={(e) => setKb(e.target.value)} />
            <button type="submit" disabled={busy}>{busy ? "Thinking..." : "Ask"}</button>
          </form>
        </section>
      </div>
    </main>
  );
}
