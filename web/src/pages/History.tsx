// Run history, newest first, filtered by workflow and status (the API's own
// filters), each opening its run view.  On a phone each run is a card with
// every column on a line of its own (Status, Started and Finished in view).
import { useEffect, useState } from "react";
import { api } from "../api";
import { Link, navigate } from "../router";
import { StatusBadge, Wide } from "../components/Common";
import { useCurrentEffect } from "../components/useCurrentEffect";

interface RunRow {
  run_id: string; workflow_id: string; workflow_version?: number; status: string;
  created_at?: string; started_at?: string; finished_at?: string; error?: string;
}

/** On a phone each row is a card of labelled lines (pages.css), so the roles
 * are spelled out: a table laid out otherwise keeps them. */
const COLUMNS = ["Compare", "Run", "Workflow", "Status", "Started", "Finished"];

const STATUSES = ["", "queued", "running", "waiting", "succeeded", "failed", "cancelled"];

export function History({ query }: { query: URLSearchParams }) {
  const workflow = query.get("workflow") ?? "";
  const status = query.get("status") ?? "";
  const [runs, setRuns] = useState<RunRow[] | null>(null);
  const [workflows, setWorkflows] = useState<string[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [chosen, setChosen] = useState<string[]>([]);
  const since = query.get("since") ?? "";
  const until = query.get("until") ?? "";

  useEffect(() => {
    api<{ workflows: { id: string }[] }>("GET", "/api/workflows?limit=500")
      .then((data) => setWorkflows(data.workflows.map((w) => w.id))).catch(() => undefined);
  }, []);
  useCurrentEffect((current) => {
    const params = new URLSearchParams({ limit: "100" });
    if (workflow) params.set("workflow", workflow);
    if (status) params.set("status", status);
    setRuns(null);
    api<{ runs: RunRow[] }>("GET", `/api/runs?${params}`)
      .then((data) => { if (current()) setRuns(data.runs); })
      .catch((err) => { if (current()) setError(err.message); });
  }, [workflow, status]);

  function filter(key: string, value: string) {
    const params = new URLSearchParams(query);
    if (value) params.set(key, value); else params.delete(key);
    navigate(`/runs${params.toString() ? `?${params}` : ""}`);
  }

  // the date filter applies to the runs listed (the newest 100 of the other filters)
  const day = (run: RunRow) => (run.created_at ?? run.started_at ?? "").slice(0, 10);
  const shown = (runs ?? []).filter((run) => (!since || day(run) >= since) && (!until || day(run) <= until));
  const toggle = (id: string) => setChosen((list) =>
    list.includes(id) ? list.filter((x) => x !== id) : [...list, id].slice(-2));

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
        <label htmlFor="filter-since">From</label>
        <input id="filter-since" type="date" value={since} onChange={(e) => filter("since", e.target.value)} />
        <label htmlFor="filter-until">To</label>
        <input id="filter-until" type="date" value={until} onChange={(e) => filter("until", e.target.value)} />
        <button type="button" disabled={chosen.length !== 2}
                onClick={() => navigate(`/runs/compare?a=${chosen[0]}&b=${chosen[1]}`)}>
          Compare the two selected runs
        </button>
      </div>
      {error && <p role="alert" className="error">{error}</p>}
      {runs === null ? <p>Loading...</p> : shown.length === 0 ? <p>No runs match.</p> : (
        <Wide label="Runs"><table className="runs-table" role="table">
          <thead role="rowgroup"><tr role="row">{COLUMNS.map((name) =>
            <th key={name} role="columnheader">{name}</th>)}</tr></thead>
          <tbody role="rowgroup">
            {shown.map((run) => (
              <tr key={run.run_id} role="row">
                <td role="cell" data-label="Compare"><input type="checkbox" aria-label={`Select run ${run.run_id.slice(0, 12)} to compare`}
                           checked={chosen.includes(run.run_id)} onChange={() => toggle(run.run_id)} /></td>
                <td role="cell" data-label="Run"><Link to={`/runs/${run.run_id}`}><code>{run.run_id.slice(0, 12)}</code></Link></td>
                <td role="cell" data-label="Workflow">{run.workflow_id}{run.workflow_version ? ` v${run.workflow_version}` : ""}</td>
                <td role="cell" data-label="Status"><StatusBadge status={run.status} />
                  {/* it will end failed once nothing waits; `--status failed` lists it only then */}
                  {run.status === "waiting" && run.error &&
                    <span className="muted branch-failed" title={run.error}> a branch failed</span>}</td>
                <td role="cell" data-label="Started">{when(run.started_at ?? run.created_at)}</td>
                <td role="cell" data-label="Finished">{when(run.finished_at)}</td>
              </tr>
            ))}
          </tbody>
        </table></Wide>
      )}
    </main>
  );
}

/** "2026-11-23 10:30:07 UTC" from an ISO time (UTC, like the date filter). */
function when(iso?: string): string {
  return iso ? `${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC` : "";
}
