// Two runs side by side: status, inputs, outputs and each block's status,
// the rows that differ marked.
import { useState } from "react";
import { api } from "../api";
import { useCurrentEffect } from "../components/useCurrentEffect";
import { Link } from "../router";
import { Json, StatusBadge, Wide } from "../components/Common";

export function Compare({ a, b }: { a: string; b: string }) {
  const [runs, setRuns] = useState<any[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useCurrentEffect((current) => {
    Promise.all([a, b].map((id) => api<any>("GET", `/api/runs/${encodeURIComponent(id)}`)))
      .then((both) => { if (current()) setRuns(both); })
      .catch((err) => { if (current()) setError(err.message); });
  }, [a, b]);
  if (error) return <main><h1>Compare runs</h1><p role="alert" className="error">{error}</p></main>;
  if (!runs) return <main><h1>Compare runs</h1><p>Loading...</p></main>;
  const blockIds = [...new Set(runs.flatMap((run) => Object.keys(run.blocks ?? {})))];
  const same = (f: (run: any) => unknown) => JSON.stringify(f(runs[0])) === JSON.stringify(f(runs[1]));
  return (
    <main>
      <h1>Compare runs</h1>
      <Wide label="The two runs"><table>
        <thead><tr><th></th>{runs.map((run) => (
          <th key={run.run_id}><Link to={`/runs/${run.run_id}`}><code>{run.run_id.slice(0, 12)}</code></Link>
            {" "}{run.workflow_id} v{run.workflow_version} <StatusBadge status={run.status} /></th>))}</tr></thead>
        <tbody>
          <tr className={same((r) => r.inputs) ? "" : "differs"}><th>Inputs<Differs on={!same((r) => r.inputs)} /></th>
            {runs.map((run) => <td key={run.run_id}><Json label={`Inputs of ${run.run_id}`} value={run.inputs} /></td>)}</tr>
          <tr className={same((r) => r.outputs) ? "" : "differs"}><th>Outputs<Differs on={!same((r) => r.outputs)} /></th>
            {runs.map((run) => <td key={run.run_id}><Json label={`Outputs of ${run.run_id}`} value={run.outputs} /></td>)}</tr>
          {blockIds.map((id) => (
            <tr key={id} className={same((r) => r.blocks?.[id]?.output) ? "" : "differs"}>
              <th>{id}<Differs on={!same((r) => r.blocks?.[id]?.output)} /></th>
              {runs.map((run) => (
                <td key={run.run_id}>{run.blocks?.[id] ? <>
                  <StatusBadge status={run.blocks[id].status} />
                  <Json label={`Output of ${id} in ${run.run_id}`} value={run.blocks[id].output} /></> : "-"}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table></Wide>
    </main>
  );
}

function Differs({ on }: { on: boolean }) {
  return on ? <span className="differs-note"> (differs)</span> : null;
}
