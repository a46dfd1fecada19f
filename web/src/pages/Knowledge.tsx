// Knowledge bases: yours and the shared ones, a base's documents, uploading
// text files (with tags), and a search box showing each hit's score and tags.
import { useEffect, useState } from "react";
import { api, ApiError } from "../api";
import { Link, navigate } from "../router";

interface Base { name: string; description: string; shared: boolean; documents: number; chunks: number }
interface Document { id: number; name: string; source: string; tags: Record<string, string[]>; chunks: number }
interface Hit { documentName: string; content: string; similarity: number; metadata: { tags: Record<string, string[]> } }

function tagText(tags: Record<string, string[]> | undefined): string {
  return Object.entries(tags ?? {}).map(([key, values]) => `${key}: ${[values].flat().join(", ")}`).join("; ");
}

export function KnowledgeList() {
  const [bases, setBases] = useState<Base[] | null>(null);
  const [name, setName] = useState("");
  const [error, setError] = useState<string | null>(null);
  const load = () => api<{ knowledge_bases: Base[] }>("GET", "/api/knowledge")
    .then((data) => setBases(data.knowledge_bases)).catch((err) => setError(err.message));
  useEffect(() => { load(); }, []);
  return (
    <main>
      <h1>Knowledge bases</h1>
      <form className="toolbar" onSubmit={async (event) => {
        event.preventDefault();
        try {
          await api("POST", "/api/knowledge", { json: { name: name.trim() } });
          navigate(`/knowledge/${encodeURIComponent(name.trim())}`);
        } catch (err) { setError((err as Error).message); }
      }}>
        <label htmlFor="new-kb">New knowledge base</label>
        <input id="new-kb" value={name} required onChange={(e) => setName(e.target.value)} />
        <button type="submit">Create</button>
      </form>
      {error && <p role="alert" className="error">{error}</p>}
      {bases === null ? <p>Loading...</p> : bases.length === 0 ? <p>No knowledge bases yet.</p> : (
        <table>
          <thead><tr><th>Name</th><th>Owner</th><th>Documents</th><th>Chunks</th><th>Description</th></tr></thead>
          <tbody>
            {bases.map((base) => (
              <tr key={`${base.shared}-${base.name}`}>
                <td><Link to={`/knowledge/${encodeURIComponent(base.name)}`}>{base.name}</Link></td>
                <td>{base.shared ? "shared" : "yours"}</td>
                <td>{base.documents}</td><td>{base.chunks}</td><td>{base.description}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </main>
  );
}

export function KnowledgeBase({ name }: { name: string }) {
  const [documents, setDocuments] = useState<Document[] | null>(null);
  const [missing, setMissing] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [tags, setTags] = useState("");
  const [query, setQuery] = useState("");
  const [hits, setHits] = useState<Hit[] | null>(null);
  const path = `/api/knowledge/${encodeURIComponent(name)}`;

  const load = () => api<{ documents: Document[] }>("GET", `${path}/documents`)
    .then((data) => setDocuments(data.documents))
    .catch((err) => (err as ApiError).status === 404 ? setMissing(err.message) : setError(err.message));
  useEffect(() => { load(); }, [name]);

  async function upload(files: FileList) {
    setError(null);
    const parsed: Record<string, string[]> = {};
    for (const pair of tags.split(";").map((t) => t.trim()).filter(Boolean)) {
      const [key, values] = pair.split(":");
      if (key && values) parsed[key.trim()] = values.split(",").map((v) => v.trim()).filter(Boolean);
    }
    try {
      for (const file of Array.from(files)) {
        const report = await api<any>("POST", `${path}/documents`,
                                      { json: { name: file.name, text: await file.text(), tags: parsed } });
        setNotice(`${file.name}: ${report.chunks} chunk(s) indexed.`);
      }
      load();
    } catch (err) { setError((err as Error).message); }
  }

  async function search(event: React.FormEvent) {
    event.preventDefault();
    try {
      const found = await api<{ results: Hit[] }>("POST", `${path}/search`, { json: { query, top_k: 5 } });
      setHits(found.results);
    } catch (err) { setError((err as Error).message); }
  }

  if (missing) return <main><h1>Not found</h1><p role="alert">{missing}</p></main>;
  return (
    <main>
      <h1>Knowledge base {name}</h1>
      <p><Link to="/knowledge">All knowledge bases</Link></p>
      {error && <p role="alert" className="error">{error}</p>}
      {notice && <p role="status" className="ok">{notice}</p>}
      <section aria-label="Search">
        <form className="toolbar" onSubmit={search}>
          <label htmlFor="kb-query">Search</label>
          <input id="kb-query" type="search" value={query} required onChange={(e) => setQuery(e.target.value)} />
          <button type="submit">Search</button>
        </form>
        {hits && (hits.length === 0 ? <p>No hits.</p> : (
          <ol className="hits" aria-label="Hits">
            {hits.map((hit, i) => (
              <li key={i}>
                <strong>{hit.documentName}</strong> <span className="badge">score {hit.similarity.toFixed(3)}</span>
                {tagText(hit.metadata?.tags) && <span className="muted"> {tagText(hit.metadata.tags)}</span>}
                <p>{hit.content.length > 400 ? `${hit.content.slice(0, 400)}...` : hit.content}</p>
              </li>
            ))}
          </ol>
        ))}
      </section>
      <section aria-label="Add documents">
        <h2>Add documents</h2>
        <div className="toolbar">
          <label htmlFor="kb-tags">Tags (e.g. category: policies, legal)</label>
          <input id="kb-tags" value={tags} onChange={(e) => setTags(e.target.value)} />
          <label htmlFor="kb-upload" className="button">Upload text or Markdown files</label>
          <input id="kb-upload" type="file" multiple accept=".txt,.md,.markdown,.csv,.json,.html"
                 className="visually-hidden" onChange={(e) => e.target.files && upload(e.target.files)} />
        </div>
      </section>
      <h2>Documents</h2>
      {documents === null ? <p>Loading...</p> : documents.length === 0 ? <p>No documents yet.</p> : (
        <table>
          <thead><tr><th>Document</th><th>Tags</th><th>Chunks</th><th>Source</th></tr></thead>
          <tbody>
            {documents.map((doc) => (
              <tr key={doc.id}><td>{doc.name}</td><td>{tagText(doc.tags)}</td><td>{doc.chunks}</td>
                <td className="muted">{doc.source}</td></tr>
            ))}
          </tbody>
        </table>
      )}
    </main>
  );
}
