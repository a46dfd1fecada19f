// Run history, newest first, filtered by workflow and status (the API's own
// filters), each opening its run view.
import { useEffect, useState } from "react";
import { api } from "../api";
import { Link, navigate } from "../router";
import { StatusBadge } from "../components/Common";

interface RunRow {
  run_id: string; workflow_id: string; workflow_version?: number; status: string;
  created_at?: string; started_at?: string; finished_at?: string; error?: string;
}

const STATUSES = ["", "running", "succeeded", "failed", "cancelled"];

export function History({ query }: { query: URLSearchParams }) {
  const workflow = query.get("workflow") ?? "";
  const status = query.get("status") ?? "";
  const [runs, setRuns] = useState<RunRow[] | null>(null);
  const [workflows, setWorkflows] = useState<string[]>([]);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    api<{ workflows: { id: string }[] }>("GET", "/api/workflows?limit=500")
      .then((data) => setWorkflows(data.workflows.map((w) => w.id))).catch(() => undefined);
  }, []);
  useEffect(() => {
    const params = new URLSearchParams({ limit: "100" });
    if (workflow) params.set("workflow", workflow);
    if (status) params.set("status", status);
    setRuns(null);
    api<{ runs: RunRow[] }>("GET", `/api/runs?${params}`).then((data) => setRuns(data.runs))
      .catch((err) => setError(err.message));
  }, [workflow, status]);

  function filter(key: string, value: string) {
    const params = new URLSearchParams(query);
    if (value) params.set(key, value); else params.delete(key);
    navigate(`/runs${params.toString() ? `?${params}` : ""}`);
  }

  return (
    <main>
      <h1>Runs</h1>
      <div className="toolbar">
        <label htmlFor="filter-workflow">Workflow</label>
        <select id="filter-workflow" value={workflow} onChange={(e) => filter("workflow", e.target.value)}>
          <option value="">all workflows</option>
          {[...new Set([...workflows, ...(workflow ? [workflow] : [])])].map((id) =>
            <option key={id} value={id}>{id}</option>)}
        </select>
        <label htmlFor="filter-status">Status</label>
        <select id="filter-status" value={status} onChange={(e) => filter("status", e.target.value)}>
          {STATUSES.map((s) => <option key={s} value={s}>{s || "any status"}</option>)}
        </select>
      </div>
      {error && <p role="alert" className="error">{error}</p>}
      {runs === null ? <p>Loading...</p> : runs.length === 0 ? <p>No runs match.</p> : (
        <table>
          <thead><tr><th>Run</th><th>Workflow</th><th>Status</th><th>Started</th><th>Finished</th></tr></thead>
          <tbody>
            {runs.map((run) => (
              <tr key={run.run_id}>
                <td><Link to={`/runs/${run.run_id}`}><code>{run.run_id.slice(0, 12)}</code></Link></td>
                <td>{run.workflow_id}{run.workflow_version ? ` v${run.workflow_version}` : ""}</td>
                <td><StatusBadge status={run.status} /></td>
                <td>{run.started_at ?? run.created_at ?? ""}</td>
                <td>{run.finished_at ?? ""}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </main>
  );
}
