// Workflows: the latest version of each, its last run's status, a search box
// and an upload of a YAML or JSON file.
import { useEffect, useState } from "react";
import { api, ApiError, type Problem } from "../api";
import { Link, navigate } from "../router";
import { ProblemList, StatusBadge } from "../components/Common";

interface WorkflowRow {
  id: string;
  name?: string;
  description?: string;
  version: number;
  updated_at?: string;
  created_at?: string;
  document?: { name?: string; description?: string };
}

export function Workflows() {
  const [rows, setRows] = useState<WorkflowRow[] | null>(null);
  const [last, setLast] = useState<Record<string, string>>({});
  const [descriptions, setDescriptions] = useState<Record<string, string>>({});
  const [search, setSearch] = useState("");
  const [error, setError] = useState<{ message: string; problems: Problem[] } | null>(null);

  useEffect(() => {
    api<{ workflows: WorkflowRow[] }>("GET", "/api/workflows?limit=500").then(async (data) => {
      setRows(data.workflows);
      const statuses: Record<string, string> = {};
      const texts: Record<string, string> = {};
      await Promise.all(data.workflows.map(async (row) => {
        const full = await api<WorkflowRow>("GET", `/api/workflows/${encodeURIComponent(row.id)}`);
        texts[row.id] = full.document?.description ?? "";
        const runs = await api<{ runs: { status: string }[] }>(
          "GET", `/api/runs?workflow=${encodeURIComponent(row.id)}&limit=1`);
        statuses[row.id] = runs.runs[0]?.status ?? "never run";
      }));
      setDescriptions(texts);
      setLast(statuses);
    }).catch((err) => setError({ message: err.message, problems: [] }));
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

  const describe = (row: WorkflowRow) => descriptions[row.id] ?? "";
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
        <label htmlFor="upload" className="button">Upload a workflow (YAML or JSON)</label>
        <input id="upload" type="file" accept=".yaml,.yml,.json" className="visually-hidden"
               onChange={(event) => { const f = event.target.files?.[0]; if (f) upload(f); }} />
      </div>
      {error && <div role="alert" className="error">{error.message}<ProblemList problems={error.problems} /></div>}
      {rows === null ? <p>Loading...</p> : rows.length === 0 ? (
        <p>No workflows yet: upload a YAML or JSON file (e.g. <code>examples/support.yaml</code>).</p>
      ) : (
        <table>
          <thead><tr><th>Name</th><th>Description</th><th>Version</th><th>Last run</th></tr></thead>
          <tbody>
            {shown.map((row) => (
              <tr key={row.id}>
                <td><Link to={`/workflows/${encodeURIComponent(row.id)}`}>{title(row)}</Link>
                  <div className="muted"><code>{row.id}</code></div></td>
                <td>{describe(row)}</td>
                <td>{row.version}</td>
                <td>{last[row.id] ? <StatusBadge status={last[row.id]} /> : "..."}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </main>
  );
}

const title = (row: WorkflowRow) => row.name || row.document?.name || row.id;

