// A workflow: its graph (following the editor's text while it is valid), the
// selected block's config, the YAML editor with live problems, versions, save.
import { useEffect, useMemo, useState } from "react";
import YAML from "yaml";
import { api, ApiError, type Problem } from "../api";
import { Link, navigate } from "../router";
import { Graph } from "../components/Graph";
import { Editor, type Checked } from "../components/Editor";
import { Json, ProblemList } from "../components/Common";
import type { WorkflowGraph } from "../layout";

interface Version { version: number; created_at?: string }

/** The stored document (every default written out) as the YAML a person
 * writes: empty `after: []`, `with: {}`, `blocks: []` and top-level empty
 * sections are left out; nothing inside a block's `with` is touched. */
export function readable(document: any): any {
  const empty = (value: unknown) => (Array.isArray(value) && value.length === 0) ||
    (value !== null && typeof value === "object" && !Array.isArray(value) && Object.keys(value).length === 0);
  const block = (spec: any): any => Object.fromEntries(Object.entries(spec)
    .filter(([, value]) => !empty(value))
    .map(([key, value]) => [key, key === "blocks" && Array.isArray(value) ? value.map(block) : value]));
  const top = Object.fromEntries(Object.entries(document ?? {}).filter(([, value]) => !empty(value)));
  if (Array.isArray(top.blocks)) top.blocks = top.blocks.map(block);
  return top;
}

export function findBlock(blocks: any[] | undefined, id: string): any | null {
  for (const block of blocks ?? []) {
    if (block?.id === id) return block;
    const inner = findBlock(block?.blocks, id);
    if (inner) return inner;
  }
  return null;
}

export function WorkflowPage({ id, version }: { id: string; version: number | null }) {
  const [text, setText] = useState<string | null>(null);
  const [initial, setInitial] = useState<string | null>(null);
  const [graph, setGraph] = useState<WorkflowGraph | null>(null);
  const [current, setCurrent] = useState<number | null>(null);
  const [versions, setVersions] = useState<Version[]>([]);
  const [selected, setSelected] = useState<string | null>(null);
  const [valid, setValid] = useState(true);
  const [notice, setNotice] = useState<string | null>(null);
  const [error, setError] = useState<{ message: string; problems: Problem[] } | null>(null);
  const [missing, setMissing] = useState<string | null>(null);

  async function load() {
    const suffix = version ? `?version=${version}` : "";
    try {
      const row = await api<any>("GET", `/api/workflows/${encodeURIComponent(id)}${suffix}`);
      // the text as the author wrote it (comments, key order); a re-dump only
      // for versions saved before texts were kept
      const yamlText: string = row.source ?? YAML.stringify(readable(row.document),
                                                            { lineWidth: 0 });
      setInitial(yamlText);
      setText(yamlText);
      setCurrent(row.version);
      setGraph(await api<WorkflowGraph>("GET",
        `/api/workflows/${encodeURIComponent(id)}/graph${suffix}`));
      setVersions((await api<{ versions: Version[] }>(
        "GET", `/api/workflows/${encodeURIComponent(id)}/versions`)).versions);
    } catch (err) {
      if ((err as ApiError).status === 404) setMissing((err as Error).message);
      else setError({ message: (err as Error).message, problems: [] });
    }
  }

  useEffect(() => { load(); }, [id, version]);

  const document = useMemo(() => {
    try { return text ? YAML.parse(text) : null; } catch { return null; }
  }, [text]);
  const block = selected && document ? findBlock(document.blocks, selected) : null;

  async function save() {
    if (text === null) return;
    setError(null);
    try {
      const saved = await api<any>("PUT", `/api/workflows/${encodeURIComponent(id)}`,
                                   { text, type: "application/yaml" });
      setNotice(`Saved version ${saved.version}.`);
      setCurrent(saved.version);
      setVersions((await api<{ versions: Version[] }>(
        "GET", `/api/workflows/${encodeURIComponent(id)}/versions`)).versions);
      if (version) navigate(`/workflows/${encodeURIComponent(id)}`, true);
    } catch (err) {
      const e = err as ApiError;
      setError({ message: e.message, problems: e.details ?? [] });
    }
  }

  if (missing) return <main><h1>Not found</h1><p role="alert">{missing}</p></main>;
  return (
    <main className="workflow-page">
      <div className="title-row">
        <h1>{graph?.name ?? id}</h1>
        <span className="badge" aria-label="Version shown">version {current ?? "..."}</span>
        <label htmlFor="version">Versions</label>
        <select id="version" value={version ?? ""} onChange={(event) => navigate(
          `/workflows/${encodeURIComponent(id)}${event.target.value ? `?version=${event.target.value}` : ""}`)}>
          <option value="">latest</option>
          {versions.map((v) => <option key={v.version} value={v.version}>version {v.version}</option>)}
        </select>
        <button type="button" onClick={save} disabled={!valid}>Save as a new version</button>
        <Link to={`/workflows/${encodeURIComponent(id)}/run`} className="button">Run...</Link>
        <Link to={`/runs?workflow=${encodeURIComponent(id)}`}>Runs of this workflow</Link>
      </div>
      {notice && <p role="status" className="ok">{notice}</p>}
      {error && <div role="alert" className="error">{error.message}<ProblemList problems={error.problems} /></div>}
      <div className="split">
        <section className="graph-pane" aria-label="Graph">
          {graph ? <Graph graph={graph} selected={selected} onSelect={setSelected} /> : <p>Loading...</p>}
          {block && (
            <aside className="side-panel" aria-label={`Block ${selected}`}>
              <h2>{block.name ?? block.id} <span className="muted">({block.type})</span></h2>
              {block.description && <p>{block.description}</p>}
              {block.type === "workflow" && typeof block.with?.workflow === "string" &&
                !/[/.]/.test(block.with.workflow.split("@")[0]) && (
                <p><Link to={`/workflows/${encodeURIComponent(block.with.workflow.split("@")[0])}`}>
                  Open the nested workflow {block.with.workflow}</Link></p>)}
              <Json label="Block config" value={YAML.stringify(block, { lineWidth: 0 })} />
              <button type="button" onClick={() => setSelected(null)}>Close</button>
            </aside>
          )}
        </section>
        <section className="editor-pane" aria-label="Editor">
          {initial !== null && (
            <Editor initial={initial} onChange={(value) => { setText(value); setNotice(null); }}
                    onChecked={(checked: Checked) => {
                      setValid(checked.valid);
                      if (checked.graph) setGraph(checked.graph);
                    }} />
          )}
        </section>
      </div>
    </main>
  );
}
