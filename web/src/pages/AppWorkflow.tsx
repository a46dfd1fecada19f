// An application's shipped workflow (the chat, the research phases): its graph
// and its YAML, read-only.  Chat and research runs name these workflows, which
// no user stored, so a run's "of <workflow>" link comes here.
import { useState } from "react";
import { api, ApiError } from "../api";
import { useCurrentEffect } from "../components/useCurrentEffect";
import { Link } from "../router";
import { Graph } from "../components/Graph";
import type { WorkflowGraph } from "../layout";
import { Prose } from "../components/Prose";

interface App { id: string; name: string; description: string; source: string; graph: WorkflowGraph }

export function AppWorkflow({ id }: { id: string }) {
  const [app, setApp] = useState<App | null>(null);
  const [selected, setSelected] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  useCurrentEffect((current) => {
    api<App>("GET", `/api/apps/${encodeURIComponent(id)}`)
      .then((loaded) => { if (current()) setApp(loaded); })
      .catch((err) => {
        if (current()) setError((err as ApiError).status === 404
          ? `There is no application workflow named '${id}'.` : (err as Error).message);
      });
  }, [id]);
  if (error) return <main><h1>Application workflow</h1><p role="alert" className="error">{error}</p></main>;
  if (!app) return <main><h1>Application workflow</h1><p>Loading...</p></main>;
  const chosen = app.graph.nodes.find((node) => node.id === selected);
  return (
    <main className="app-workflow">
      <div className="title-row">
        <h1>{app.name}</h1>
        <span className="badge">shipped with flowforge</span>
        <Link to={`/runs?workflow=${encodeURIComponent(app.id)}`}>Its runs</Link>
      </div>
      {app.description && <p><Prose text={app.description} /></p>}
      <p className="muted">Read-only: this is the workflow the application runs (<code>{app.id}</code>).
        To change it, save a copy of the YAML below as a workflow of your own.</p>
      <div className="split">
        <section className="graph-pane" aria-label="Graph">
          <Graph graph={app.graph} selected={selected} onSelect={setSelected} />
        </section>
        <section className="detail-pane" aria-label="Source">
          {chosen && <p><strong>{chosen.name}</strong> ({chosen.type}){chosen.description ? <>: <Prose text={chosen.description} /></> : ""}</p>}
          <h2>YAML</h2>
          <pre className="json source" tabIndex={0} aria-label="Workflow source">{app.source}</pre>
        </section>
      </div>
    </main>
  );
}
