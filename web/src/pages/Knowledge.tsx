// Knowledge bases: yours and the shared ones, a base's documents, uploading
// text files (with tags), a search box showing each hit's score and tags, and
// deleting a document or a whole base of one's own.
import { useEffect, useRef, useState } from "react";
import { api, ApiError } from "../api";
import { formError } from "../errors";
import { Wide } from "../components/Common";
import { Link, navigate } from "../router";
import { Prose } from "../components/Prose";

interface Base { name: string; description: string; shared: boolean; documents: number; chunks: number }
interface Document { id: number; name: string; source: string; tags: Record<string, string[]>; chunks: number }
interface Hit { documentName: string; content: string; similarity: number; chunkIndex?: number;
                metadata: { tags: Record<string, string[]> } }

const NAME_RULE = "use 1 to 100 characters, without '/', '\\' or a line break";

function tagText(tags: Record<string, string[]> | undefined): string {
  return Object.entries(tags ?? {}).map(([key, values]) => `${key}: ${[values].flat().join(", ")}`).join("; ");
}

/** A chunk as a reader wants it: without a Markdown file's YAML front matter
 * (documents added before the server parsed it still carry it). */
function shownText(content: string): string {
  const text = /^---\r?\n[\s\S]*?\r?\n---\r?\n?/.test(content)
    ? content.replace(/^---\r?\n[\s\S]*?\r?\n---\r?\n?/, "").trimStart() : content;
  return text.length > 400 ? `${text.slice(0, 400)}...` : text;
}

function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

export function KnowledgeList() {
  const [bases, setBases] = useState<Base[] | null>(null);
  const [name, setName] = useState("");
  const [error, setError] = useState<string | null>(null);
  const notice = new URLSearchParams(location.search).get("deleted");
  const load = () => api<{ knowledge_bases: Base[] }>("GET", "/api/knowledge")
    .then((data) => setBases(data.knowledge_bases)).catch((err) => setError(err.message));
  useEffect(() => { load(); }, []);

  async function create(event: React.FormEvent) {
    event.preventDefault();
    const wanted = name.trim();
    if (!wanted || wanted.length > 100 || /[/\\\n]/.test(wanted)) {
      setError(`New knowledge base: '${wanted}' cannot be a name: ${NAME_RULE}.`);
      return;
    }
    try {
      await api("POST", "/api/knowledge", { json: { name: wanted } });
      navigate(`/knowledge/${encodeURIComponent(wanted)}`);
    } catch (err) { setError(formError(err, { name: "New knowledge base" })); }
  }

  return (
    <main>
      <h1>Knowledge bases</h1>
      {notice && <p role="status" className="ok">Knowledge base {notice} deleted.</p>}
      <form className="toolbar" onSubmit={create} noValidate>
        <label htmlFor="new-kb">New knowledge base</label>
        <input id="new-kb" value={name} required maxLength={100} aria-describedby="new-kb-rule"
               onChange={(e) => setName(e.target.value)} />
        <button type="submit">Create</button>
        <span id="new-kb-rule" className="muted">A name: {NAME_RULE}.</span>
      </form>
      {error && <p role="alert" className="error">{error}</p>}
      {bases === null ? <p>Loading...</p> : bases.length === 0 ? <p>No knowledge bases yet.</p> : (
        <Wide label="Knowledge bases"><table>
          <thead><tr><th>Name</th><th>Owner</th><th>Documents</th><th>Chunks</th><th>Description</th></tr></thead>
          <tbody>
            {bases.map((base) => (
              <tr key={`${base.shared}-${base.name}`}>
                <td><Link to={`/knowledge/${encodeURIComponent(base.name)}`}>{base.name}</Link></td>
                <td>{base.shared ? "shared" : "yours"}</td>
                <td>{base.documents}</td><td>{base.chunks}</td><td><Prose text={base.description} /></td>
              </tr>
            ))}
          </tbody>
        </table></Wide>
      )}
    </main>
  );
}

export function KnowledgeBase({ name }: { name: string }) {
  const [documents, setDocuments] = useState<Document[] | null>(null);
  const [shared, setShared] = useState<boolean | null>(null);
  const [missing, setMissing] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [tags, setTags] = useState("");
  const [query, setQuery] = useState("");
  const [hits, setHits] = useState<Hit[] | null>(null);
  const [confirming, setConfirming] = useState<number | "base" | null>(null);
  const searched = useRef<string | null>(null);    // the query the hits shown answer
  const path = `/api/knowledge/${encodeURIComponent(name)}`;

  const load = () => api<{ documents: Document[] }>("GET", `${path}/documents`)
    .then((data) => setDocuments(data.documents))
    .catch((err) => (err as ApiError).status === 404 ? setMissing(err.message) : setError(err.message));
  useEffect(() => {
    load();
    api<{ knowledge_bases: Base[] }>("GET", "/api/knowledge").then((data) => {
      const own = data.knowledge_bases.find((b) => b.name === name && !b.shared);
      setShared(!own);
    }).catch(() => undefined);
  }, [name]);

  /** Search again for what the hits on screen answer: they change with the documents. */
  async function research() {
    if (searched.current !== null) await run(searched.current);
  }

  async function upload(files: FileList) {
    setError(null);
    setNotice(null);
    const parsed: Record<string, string[]> = {};
    for (const pair of tags.split(";").map((t) => t.trim()).filter(Boolean)) {
      const [key, values] = pair.split(":");
      if (key && values) parsed[key.trim()] = values.split(",").map((v) => v.trim()).filter(Boolean);
    }
    const added: string[] = [];
    const failed: string[] = [];
    for (const file of Array.from(files)) {
      try {
        const report = await api<any>("POST", `${path}/documents`,
                                      { json: { name: file.name, text: await file.text(), tags: parsed } });
        added.push(`${file.name} (${plural(report.chunks, "chunk")})`);
      } catch (err) {
        failed.push(`${file.name}: ${(err as Error).message}`);
      }
    }
    if (added.length) {
      setNotice(added.length === 1 ? `Indexed ${added[0]}.`
        : `Indexed ${added.length} files: ${added.join(", ")}.`);
    }
    if (failed.length) setError(`Not added: ${failed.join("; ")}`);
    await load();
    await research();
  }

  async function run(text: string) {
    try {
      const found = await api<{ results: Hit[] }>("POST", `${path}/search`, { json: { query: text, top_k: 5 } });
      searched.current = text;
      // best first by the score shown, whatever order the server chose
      setHits([...found.results].sort((a, b) => b.similarity - a.similarity));
    } catch (err) { setError((err as Error).message); }
  }

  async function search(event: React.FormEvent) {
    event.preventDefault();
    setError(null);
    await run(query);
  }

  async function removeDocument(doc: Document) {
    setConfirming(null);
    try {
      await api("DELETE", `${path}/documents/${doc.id}`);
      setNotice(`Deleted ${doc.name}.`);
      await load();
      await research();
    } catch (err) { setError((err as Error).message); }
  }

  async function removeBase() {
    try {
      await api("DELETE", path);
      navigate(`/knowledge?deleted=${encodeURIComponent(name)}`);
    } catch (err) { setConfirming(null); setError((err as Error).message); }
  }

  if (missing) return <main><h1>Not found</h1><p role="alert">There is no knowledge base named '{name}'
    that you can see. <Link to="/knowledge">All knowledge bases</Link></p></main>;
  const mine = shared === false;
  return (
    <main>
      <h1>Knowledge base {name}</h1>
      <p><Link to="/knowledge">All knowledge bases</Link>
        {shared && <span className="muted"> (shared: an administrator changes it)</span>}</p>
      {error && <p role="alert" className="error">{error}</p>}
      {notice && <p role="status" className="ok">{notice}</p>}
      <section aria-label="Search">
        <form className="toolbar" onSubmit={search}>
          <label htmlFor="kb-query">Search</label>
          <input id="kb-query" type="search" value={query} required onChange={(e) => setQuery(e.target.value)} />
          <button type="submit">Search</button>
        </form>
        {hits && (hits.length === 0 ? <p>No hits for “{searched.current}”.</p> : (
          <ol className="hits" aria-label="Hits">
            {hits.map((hit, i) => (
              <li key={i}>
                <strong>{hit.documentName}</strong> <span className="badge">score {hit.similarity.toFixed(3)}</span>
                {tagText(hit.metadata?.tags) && <span className="muted"> {tagText(hit.metadata.tags)}</span>}
                <p>{shownText(hit.content)}</p>
              </li>
            ))}
          </ol>
        ))}
      </section>
      {mine && <section aria-label="Add documents">
        <h2>Add documents</h2>
        <div className="toolbar">
          <label htmlFor="kb-tags">Tags (e.g. category: policies, legal)</label>
          <input id="kb-tags" value={tags} onChange={(e) => setTags(e.target.value)} />
          <label htmlFor="kb-upload" className="button">Upload text or Markdown files</label>
          <input id="kb-upload" type="file" multiple accept=".txt,.md,.markdown,.csv,.json,.html"
                 className="visually-hidden"
                 onChange={(e) => { if (e.target.files) upload(e.target.files).then(() => { e.target.value = ""; }); }} />
        </div>
      </section>}
      <h2>Documents</h2>
      {documents === null ? <p>Loading...</p> : documents.length === 0 ? <p>No documents yet.</p> : (
        <Wide label="Documents"><table className="documents">
          <thead><tr><th>Document</th><th>Tags</th><th>Chunks</th><th>Source</th>{mine && <th>Actions</th>}</tr></thead>
          <tbody>
            {documents.map((doc) => (
              <tr key={doc.id}><td>{doc.name}</td><td>{tagText(doc.tags)}</td><td>{doc.chunks}</td>
                <td className="muted">{doc.source}</td>
                {mine && <td>{confirming === doc.id ? <span className="confirm">
                  <button type="button" className="danger" onClick={() => removeDocument(doc)}
                          aria-label={`Yes, delete ${doc.name}`}>Yes, delete</button>{" "}
                  <button type="button" className="link" onClick={() => setConfirming(null)}>Keep it</button>
                </span> : <button type="button" className="link" aria-label={`Delete ${doc.name}`}
                                  onClick={() => setConfirming(doc.id)}>Delete</button>}</td>}
              </tr>
            ))}
          </tbody>
        </table></Wide>
      )}
      {mine && <section aria-label="Delete this knowledge base" className="danger-zone">
        <h2>Delete this knowledge base</h2>
        {confirming === "base" ? <p>
          Delete {name} and its {plural(documents?.length ?? 0, "document")}? This cannot be undone.{" "}
          <button type="button" className="danger" onClick={removeBase}>Yes, delete {name}</button>{" "}
          <button type="button" className="link" onClick={() => setConfirming(null)}>Keep it</button>
        </p> : <button type="button" className="danger" onClick={() => setConfirming("base")}>
          Delete the knowledge base</button>}
      </section>}
    </main>
  );
}
