// Workflows: the latest version of each, its last run's status, a search box,
// a new workflow built on the canvas, and an upload of a YAML or JSON file.
import { useEffect, useState } from "react";
import { api, ApiError, type Problem } from "../api";
import { Link, navigate } from "../router";
import { setImported } from "../imported";
import { ProblemList, StatusBadge } from "../components/Common";
import { Prose } from "../components/Prose";

interface WorkflowRow {
  id: string;
  name?: string;
  description?: string;
  version: number;
  updated_at?: string;
  created_at?: string;
  last_run_status?: string | null;
}

export function Workflows() {
  const [rows, setRows] = useState<WorkflowRow[] | null>(null);
  const [search, setSearch] = useState("");
  const [refused, setRefused] = useState<{ file: File; detail: string } | null>(null);
  const [error, setError] = useState<{ message: string; problems: Problem[] } | null>(null);

  useEffect(() => {
    // one request: each row carries its description and its last run's status
    api<{ workflows: WorkflowRow[] }>("GET", "/api/workflows?limit=500")
      .then((data) => setRows(data.workflows))
      .catch((err) => setError({ message: err.message, problems: [] }));
  }, []);

  async function upload(file: File) {
    setError(null);
    const text = await file.text();
    const json = file.name.toLowerCase().endsWith(".json");
    try {
      const saved = await api<WorkflowRow>("POST", "/api/workflows",
                                           { text, type: json ? "application/json" : "application/yaml" });
      navigate(`/workflows/${encodeURIComponent(saved.id)}`);
    } catch (err) {
      const e = err as ApiError;
      setError({ message: `${file.name}: ${e.message}`, problems: e.details ?? [] });
    }
  }

  /** A file of another tool (Dify, n8n, Langflow, Flowise, Pipeline or Agent
   * JSON) converted by POST /api/import, opened unsaved in the editor; a
   * refusal (nodes without a counterpart) says which and offers a partial import. */
  async function importFile(file: File, partial = false) {
    setError(null);
    setRefused(null);
    const text = await file.text();
    try {
      const answer = await api<any>("POST", "/api/import",
                                    { json: { filename: file.name, text, partial } });
      setImported({ filename: file.name, format: String(answer.format), yaml: answer.yaml,
                    report: answer.report });
      navigate("/new-workflow");
    } catch (err) {
      const e = err as ApiError;
      const detail = String(e.body?.detail ?? e.message);
      if (e.status === 422 && e.body?.report) setRefused({ file, detail });
      else setError({ message: `${file.name}: ${detail}`, problems: e.details ?? [] });
    }
  }

  const describe = (row: WorkflowRow) => row.description ?? "";
  const wanted = search.trim().toLowerCase();
  const shown = (rows ?? []).filter((row) => !wanted ||
    [row.id, title(row), describe(row)].some((text) => text.toLowerCase().includes(wanted)));

  return (
    <main>
      <h1>Workflows</h1>
      <div className="toolbar">
        <label htmlFor="search">Search workflows</label>
        <input id="search" type="search" value={search} placeholder="name, id or description"
               onChange={(event) => setSearch(event.target.value)} />
        <button type="button" onClick={() => navigate("/new-workflow")}>New workflow</button>
        <label htmlFor="upload" className="button">Upload a workflow (YAML or JSON)</label>
        <input id="upload" type="file" accept=".yaml,.yml,.json" className="visually-hidden"
               onChange={(event) => { const f = event.target.files?.[0]; if (f) upload(f); }} />
        <label htmlFor="import" className="button">Import from another tool (Dify, n8n, ...)</label>
        <input id="import" type="file" accept=".yaml,.yml,.json" className="visually-hidden"
               onChange={(event) => { const f = event.target.files?.[0]; if (f) importFile(f); }} />
      </div>
      {refused && (
        <div role="alert" className="error">{refused.file.name}: {refused.detail}
          <div><button type="button" onClick={() => importFile(refused.file, true)}>
            Import anyway: the nodes without a counterpart fail if a run reaches them</button></div>
        </div>
      )}
      {error && <div role="alert" className="error">{error.message}<ProblemList problems={error.problems} /></div>}
      {rows === null ? <p>Loading...</p> : rows.length === 0 ? (
        <p>No workflows yet: start a new one on the canvas, or upload a YAML or JSON file
          (e.g. <code>examples/support.yaml</code>).</p>
      ) : (
        <table>
          <thead><tr><th>Name</th><th>Description</th><th>Version</th><th>Last run</th></tr></thead>
          <tbody>
            {shown.map((row) => (
              <tr key={row.id}>
                <td><Link to={`/workflows/${encodeURIComponent(row.id)}`}>{title(row)}</Link>
                  <div className="muted"><code>{row.id}</code></div></td>
                <td><Prose text={describe(row)} /></td>
                <td>{row.version}</td>
                <td><StatusBadge status={row.last_run_status ?? "never run"} /></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </main>
  );
}

const title = (row: WorkflowRow) => row.name || row.id;

