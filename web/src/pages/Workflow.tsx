// A workflow in the editor: the canvas, the selected block's form and the
// YAML pane, all three on one text. The text is the source of truth: the
// canvas and the form turn each action into an edit of it (yamlEdits.ts:
// comments, key order and untouched lines kept), the YAML pane shows and
// takes the same text, the server checks it as it changes, and a save sends
// it as written. Unsaved work is not lost to a click or a reload unasked.
import { useEffect, useMemo, useRef, useState } from "react";
import YAML, { type Document } from "yaml";
import { api, ApiError, type Problem } from "../api";
import { useCurrentEffect } from "../components/useCurrentEffect";
import { Link, navigate, setLeaveWarning } from "../router";
import { Canvas } from "../components/Canvas";
import { BlockForm } from "../components/BlockForm";
import { BlockTest } from "../components/BlockTest";
import { Palette, type Pick } from "../components/Palette";
import { Editor, type Checked, type History } from "../components/Editor";
import { Json, ProblemList } from "../components/Common";
import type { WorkflowGraph } from "../layout";
import { graphOf, positions as positionsOf } from "../docGraph";
import { loadOutputs, loadSchema, type Outputs, type Schema } from "../schema";
import {
  addBlock, connect, disconnect, editText, EditRefused, freshId, removeBlock, setField,
  setPosition, unsetField,
} from "../yamlEdits";
import {
  clearLayout, copyBlock, duplicateBlock, moveBlock, pasteBlocks, renameBlock, setAfter,
} from "../structureEdits";
import { holdBlocks, useClipboardKeys, useHeldBlocks } from "../clipboard";
import { freshEntry, renameEntry, setSetting } from "../settingsEdits";
import { SettingsForm } from "../components/SettingsForm";
import { VersionDiff } from "../components/VersionDiff";
import { takeImported } from "../imported";
import { blockPaths, findBlock, readable, specsById } from "../documentTree";

interface Version { version: number; created_at?: string }

/** What "New workflow" starts from: nothing saved until the author saves. */
export const NEW_WORKFLOW = "version: 1\nid: my-workflow\nname: My workflow\nblocks: []\n";

/** Focus what was just made, once it is drawn (a few frames at most). */
function focusSoon(selector: string, tries = 30): void {
  requestAnimationFrame(() => {
    const element = document.querySelector<HTMLElement>(selector);
    if (element) element.focus();
    else if (tries > 0) focusSoon(selector, tries - 1);
  });
}

export function WorkflowPage({ id, version }: { id: string | null; version: number | null }) {
  const fresh = id === null;
  // a file imported from another tool starts the new workflow (unsaved)
  const [imported] = useState(() => (fresh ? takeImported() : null));
  const start = imported?.yaml ?? NEW_WORKFLOW;
  const [text, setText] = useState<string | null>(fresh ? start : null);
  const [initial, setInitial] = useState<string | null>(fresh ? start : null);
  const [saved, setSaved] = useState<string | null>(fresh ? NEW_WORKFLOW : null);
  const [checked, setChecked] = useState<WorkflowGraph | null>(null);
  const [current, setCurrent] = useState<number | null>(null);
  const [versions, setVersions] = useState<Version[]>([]);
  const [selected, setSelected] = useState<string | null>(null);
  const [edge, setEdge] = useState<{ source: string; target: string } | null>(null);
  const [valid, setValid] = useState(!fresh);
  const [problems, setProblems] = useState<Problem[]>([]);
  const [notice, setNotice] = useState<string | null>(null);
  const [error, setError] = useState<{ message: string; problems: Problem[] } | null>(null);
  const [missing, setMissing] = useState<string | null>(null);
  const [schema, setSchema] = useState<Schema | null>(null);
  const [palette, setPalette] = useState(false);
  // a page just opened (New workflow, a save that made the workflow): focus on its heading
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => { heading.current?.focus(); }, [id]);
  const [settings, setSettings] = useState(false);
  const [models, setModels] = useState<string[]>([]);
  const dirty = text !== null && saved !== null && text !== saved;
  const dirtyRef = useRef(false);
  dirtyRef.current = dirty;

  useEffect(() => {
    setLeaveWarning(() => dirtyRef.current
      ? "This workflow has unsaved changes: leave and lose them?" : null);
    return () => setLeaveWarning(null);
  }, []);
  useEffect(() => { loadSchema().then(setSchema).catch(() => undefined); }, []);
  const [declared, setDeclared] = useState<Outputs>({});
  useEffect(() => { loadOutputs().then(setDeclared).catch(() => undefined); }, []);
  useEffect(() => {
    api<{ models: string[] }>("GET", "/api/models").then((m) => setModels(m.models)).catch(() => setModels([]));
  }, []);

  /** `live()` turns false once another workflow or version is chosen: an
   *  answer for the old one that lands after that is dropped, not shown
   *  (useCurrentEffect). */
  async function load(live: () => boolean = () => true) {
    if (fresh) return;
    const suffix = version ? `?version=${version}` : "";
    try {
      const row = await api<any>("GET", `/api/workflows/${encodeURIComponent(id)}${suffix}`);
      if (!live()) return;
      // the text as the author wrote it (comments, key order); a re-dump only
      // for versions saved before texts were kept
      const yamlText: string = row.source ?? YAML.stringify(readable(row.document),
                                                            { lineWidth: 0 });
      setInitial(yamlText);
      setText(yamlText);
      setSaved(yamlText);
      setCurrent(row.version);
      const listed = await api<{ versions: Version[] }>(
        "GET", `/api/workflows/${encodeURIComponent(id)}/versions`);
      if (live()) setVersions(listed.versions);
    } catch (err) {
      if (!live()) return;
      if ((err as ApiError).status === 404) setMissing((err as Error).message);
      else setError({ message: (err as Error).message, problems: [] });
    }
  }

  useCurrentEffect((current) => { load(current); }, [id, version]);

  const parsed = useMemo(() => {
    try {
      const doc = text !== null ? YAML.parse(text) : null;
      return doc && typeof doc === "object" ? doc : null;
    } catch { return null; }
  }, [text]);
  const lastGood = useRef<any>(null);
  if (parsed) lastGood.current = parsed;
  const document = parsed ?? lastGood.current;
  const graph = useMemo(() => graphOf(document ?? {}), [document]);
  const positions = useMemo(() => positionsOf(document), [document]);
  const specs = useMemo(() => specsById(document?.blocks), [document]);
  const paths = useMemo(() => blockPaths(document?.blocks), [document]);
  const block = selected && document ? findBlock(document.blocks, selected) : null;

  /** One canvas or form action: an edit of the text, or a message saying why not. */
  function change(action: (doc: Document) => void, quiet = false): string | null {
    if (text === null) return "the document is not loaded yet";
    try {
      setText(editText(text, action));
      setNotice(null);
      setError(null);
      return null;
    } catch (err) {
      if (!(err instanceof EditRefused)) throw err;
      if (!quiet) setError({ message: err.message, problems: [] });
      return err.message;
    }
  }

  const nextSpot = useRef<((near: string | null) => { x: number; y: number }) | null>(null);
  const history = useRef<History | null>(null);
  const [depth, setDepth] = useState({ undo: 0, redo: 0 });
  // Ctrl/Cmd+Z, Shift+Z (or Ctrl+Y) anywhere on the page but a text field,
  // which keeps its own undo: the document's history, canvas and forms included
  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      if (!(event.ctrlKey || event.metaKey) || event.altKey) return;
      const key = event.key.toLowerCase();
      if (key !== "z" && key !== "y") return;
      const target = event.target as HTMLElement | null;
      if (target?.closest("input, textarea, select, [contenteditable='true']")) return;
      event.preventDefault();
      if (key === "y" || event.shiftKey) history.current?.redo();
      else history.current?.undo();
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, []);
  const heldBlocks = useHeldBlocks();
  function copySelected() {
    if (!selected || text === null) return;
    const doc = YAML.parseDocument(text);
    if (doc.errors.length) { setError({ message: "the YAML does not parse: fix the text first", problems: [] }); return; }
    holdBlocks(copyBlock(doc, selected));
    setNotice(`Copied block ${selected}: paste it with Ctrl+V (⌘V on a Mac) or Paste block.`);
  }
  /** One edit: the held blocks beside the selected one (inside it for a
   * loop or parallel), selected and focused once drawn. */
  function pasteHeld() {
    if (!heldBlocks) return;
    let made: string[] = [];
    change((doc) => {
      const pasted = pasteBlocks(doc, heldBlocks, selected);
      made = pasted.ids;
      if (pasted.into === null) {
        const at = nextSpot.current?.(selected) ?? { x: 0, y: 0 };
        made.forEach((pastedId, k) => setPosition(doc, pastedId, at.x + 40 * k, at.y + 40 * k));
      }
    });
    if (made.length) {
      setSelected(made[0]); setEdge(null); setSettings(false);
      focusSoon(`.react-flow__node[data-id="${made[0]}"]`);
    }
  }
  useClipboardKeys(copySelected, pasteHeld);
  function pick(choice: Pick) {
    setPalette(false);
    let made = "";
    // with a loop or parallel selected, the new block goes inside it
    const into = selected && ["loop", "parallel"].includes(specs[selected]?.type) ? selected : null;
    change((doc) => {
      made = freshId(doc, choice.type ?? choice.uses ?? "block");
      const spec = choice.type ? { id: made, type: choice.type } : { id: made, uses: choice.uses };
      if (into) {
        addBlock(doc, spec);
        moveBlock(doc, made, into);
      } else addBlock(doc, spec, nextSpot.current?.(selected) ?? { x: 0, y: 0 });
    });
    if (made) { setSelected(made); setEdge(null); focusSoon(`.react-flow__node[data-id="${made}"]`); }
  }

  const references = useMemo(() => {
    const out: string[] = [];
    for (const name of Object.keys(document?.inputs ?? {})) out.push(`input.${name}`);
    for (const name of Object.keys(document?.variables ?? {})) out.push(`vars.${name}`);
    // every block the selected one may read without a cycle: not itself, not downstream
    const downstream = new Set<string>(selected ? [selected] : []);
    for (let grew = true; grew;) {
      grew = false;
      for (const e of graph.edges) {
        if (downstream.has(e.source) && !downstream.has(e.target)) { downstream.add(e.target); grew = true; }
      }
    }
    // inside a loop or parallel: its index and item
    const parentOf = new Map(graph.nodes.map((n) => [n.id, n.parent]));
    for (let at = selected ? parentOf.get(selected) : null; at; at = parentOf.get(at)) {
      const type = specs[at]?.type;
      if (type === "loop" || type === "parallel") {
        out.push("loop.index", "loop.item");
        if (type === "loop") out.push("loop.previous");
        break;
      }
    }
    // each block's fields: what the last valid check said (it knows a set's
    // keys, an evaluator's metrics), else what its type declares: known mid-build
    const outputs = new Map((checked?.nodes ?? []).map((n: any) => [n.id, n.outputs as string[] | undefined]));
    for (const node of graph.nodes) {
      if (downstream.has(node.id)) continue;
      const fields = new Set<string>([...(outputs.get(node.id) ?? []), ...(declared[node.type] ?? [])]);
      if (node.type === "set") Object.keys(specs[node.id]?.with ?? {}).forEach((key) => fields.add(key));
      if (fields.size) fields.forEach((field) => out.push(`${node.id}.${field}`));
      else out.push(node.id);           // an open output (a function's result): the whole of it
    }
    return [...new Set(out)];
  }, [document, graph, selected, checked, specs, declared]);

  /** Each problem on the block it is in (the deepest whose path starts it). */
  const problemsByBlock = useMemo(() => {
    const out: Record<string, string[]> = {};
    const entries = Object.entries(paths).sort((a, b) => b[1].length - a[1].length);
    for (const problem of problems) {
      const hit = entries.find(([, path]) => problem.where === path || problem.where.startsWith(`${path}.`));
      if (hit) (out[hit[0]] ??= []).push(problem.message);
    }
    return out;
  }, [problems, paths]);

  const blockProblems = useMemo(() => {
    const prefix = selected ? paths[selected] : null;
    if (!prefix) return [];
    return problems.filter((p) => p.where.startsWith(`${prefix}.`))
      .map((p) => ({ ...p, where: p.where.slice(prefix.length + 1) }))
      .filter((p) => !/^blocks\[/.test(p.where));
  }, [problems, paths, selected]);

  async function save() {
    if (text === null) return;
    setError(null);
    const target = fresh ? String(parsed?.id ?? "") : id;
    try {
      if (fresh) {
        const taken = await api("GET", `/api/workflows/${encodeURIComponent(target)}`)
          .then(() => true, (err) => { if ((err as ApiError).status === 404) return false; throw err; });
        if (taken) {
          setError({ message: `a workflow '${target}' exists already: change \`id:\` to save this one ` +
                              "beside it", problems: [] });
          return;
        }
      }
      const answer = await api<any>("PUT", `/api/workflows/${encodeURIComponent(target)}`,
                                    { text, type: "application/yaml" });
      setSaved(text);
      dirtyRef.current = false;
      setNotice(`Saved version ${answer.version}.`);
      if (!fresh) focusSoon(".workflow-page .saved-notice");
      if (fresh) { navigate(`/workflows/${encodeURIComponent(target)}`, true); return; }
      setCurrent(answer.version);
      setVersions((await api<{ versions: Version[] }>(
        "GET", `/api/workflows/${encodeURIComponent(target)}/versions`)).versions);
      if (version) navigate(`/workflows/${encodeURIComponent(target)}`, true);
    } catch (err) {
      const e = err as ApiError;
      setError({ message: e.message, problems: e.details ?? [] });
    }
  }

  if (missing) return <main><h1>Not found</h1><p role="alert">{missing}</p></main>;
  const title = fresh ? "New workflow" : document?.name ?? id;
  return (
    <main className="workflow-page">
      <div className="title-row">
        <h1 tabIndex={-1} ref={heading}>{title}</h1>
        {!fresh && <>
          <span className="badge" aria-label="Version shown">version {current ?? "..."}</span>
          <label htmlFor="version">Versions</label>
          <select id="version" value={version ?? ""} onChange={(event) => navigate(
            `/workflows/${encodeURIComponent(id)}${event.target.value ? `?version=${event.target.value}` : ""}`)}>
            <option value="">latest</option>
            {versions.map((v) => <option key={v.version} value={v.version}>version {v.version}</option>)}
          </select>
        </>}
        <button type="button" onClick={() => setPalette(!palette)} aria-expanded={palette}
                disabled={text === null}>Add block</button>
        <button type="button" aria-expanded={settings && !block && !edge} disabled={text === null}
                onClick={() => {
                  const open = !(settings && !block && !edge);
                  setSettings(open);
                  if (open) { setSelected(null); setEdge(null); }
                }}>Workflow settings</button>
        <button type="button" onClick={() => history.current?.undo()} disabled={!depth.undo}
                aria-keyshortcuts="Control+Z Meta+Z">Undo</button>
        <button type="button" onClick={() => history.current?.redo()} disabled={!depth.redo}
                aria-keyshortcuts="Control+Shift+Z Meta+Shift+Z">Redo</button>
        <button type="button" onClick={pasteHeld} disabled={!heldBlocks || text === null}
                aria-keyshortcuts="Control+V Meta+V">Paste block</button>
        <button type="button" disabled={!document?.metadata?.layout}
                onClick={() => change((doc) => clearLayout(doc))}>Auto-layout</button>
        <button type="button" onClick={save} disabled={!valid}>
          {fresh ? "Save the new workflow" : "Save as a new version"}</button>
        <button type="button" disabled={text === null} onClick={() => {
          const link = window.document.createElement("a");
          link.href = URL.createObjectURL(new Blob([text ?? ""], { type: "application/yaml" }));
          link.download = `${String(parsed?.id ?? id ?? "workflow")}.yaml`;
          link.click();
          setTimeout(() => URL.revokeObjectURL(link.href), 1000);
        }}>Download YAML</button>
        {dirty && <span className="badge unsaved" role="status">Unsaved changes</span>}
        {!fresh && <>
          <Link to={`/workflows/${encodeURIComponent(id)}/run`} className="button">Run...</Link>
          <Link to={`/runs?workflow=${encodeURIComponent(id)}`}>Runs of this workflow</Link>
        </>}
      </div>
      {fresh && <p className="muted">Nothing is stored until you save: set the id and the name in
        Workflow settings (or the YAML), add blocks from the palette, connect them by dragging from
        a block's lower handle to another block.</p>}
      {notice && <p role="status" className="ok saved-notice" tabIndex={-1}>{notice}</p>}
      {imported && (
        <section aria-label="Import report" className="import-report">
          <p>Imported <code>{imported.filename}</code> ({imported.format}): nothing is saved yet;
            review it, then save.</p>
          <details><summary>What each node became</summary>
            <Json label="Import report" value={JSON.stringify(imported.report, null, 2)} /></details>
        </section>
      )}
      {!fresh && versions.length > 1 && (
        <details className="versions-compare"><summary>Compare versions</summary>
          <VersionDiff id={id} versions={versions.map((v) => v.version)} /></details>
      )}
      {error && <div role="alert" className="error">{error.message}<ProblemList problems={error.problems} /></div>}
      {palette && <Palette schema={schema} onPick={pick} onClose={() => setPalette(false)} />}
      <div className="split">
        <section className={`graph-pane${block || edge || settings ? " docked" : ""}`} aria-label="Graph">
          {document ? (
            <Canvas graph={graph} specs={specs} positions={positions} selected={selected}
                    problems={problemsByBlock}
                    nextSpot={nextSpot}
                    selectedEdge={edge ? `${edge.source}->${edge.target}` : null}
                    onSelect={(chosen) => { setSelected(chosen); if (chosen) { setEdge(null); setSettings(false); } }}
                    onSelectEdge={(chosen) => { setEdge(chosen); if (chosen) setSelected(null); }}
                    onConnect={(source, target, handle) => change((doc) => connect(doc, source, target, handle))}
                    onDelete={(blocks, edges) => {
                      change((doc) => {
                        edges.forEach((e) => disconnect(doc, e.source, e.target));
                        blocks.forEach((b) => removeBlock(doc, b));
                      });
                      if (selected && blocks.includes(selected)) setSelected(null);
                      setEdge(null);
                    }}
                    onMove={(moved, at) => change((doc) => setPosition(doc, moved, at.x, at.y))}
                    onNest={(moved, into, at) => change((doc) => {
                      moveBlock(doc, moved, into);
                      setPosition(doc, moved, at.x, at.y);
                    })} />
          ) : <p>Loading...</p>}
          {settings && !block && !edge && document && (
            <aside className="side-panel nokey" aria-label="Workflow settings">
              <h2>Workflow settings</h2>
              <SettingsForm document={document} models={models}
                            onSet={(path, value) => change((doc) => setSetting(doc, path, value), true)}
                            onRenameEntry={(section, from, to) =>
                              change((doc) => renameEntry(doc, section, from, to), true)}
                            onAdd={(section) => change((doc) => setSetting(
                              doc, [section, freshEntry(doc, section, section === "inputs" ? "input" : "var")],
                              section === "inputs" ? { type: "string" } : null))} />
              <div className="panel-actions">
                <button type="button" onClick={() => setSettings(false)}>Close</button>
              </div>
            </aside>
          )}
          {edge && !block && (
            <aside className="side-panel nokey" aria-label={`Edge ${edge.source} to ${edge.target}`}>
              <h2>{edge.source} → {edge.target}</h2>
              <button type="button" onClick={() => {
                change((doc) => disconnect(doc, edge.source, edge.target));
                setEdge(null);
              }}>Delete the edge</button>
              <button type="button" onClick={() => setEdge(null)}>Close</button>
            </aside>
          )}
          {block && (
            <aside className="side-panel nokey" aria-label={`Block ${selected}`}>
              <h2>{block.name ?? block.id} <span className="muted">({block.type ?? block.uses})</span></h2>
              {block.type === "workflow" && typeof block.with?.workflow === "string" &&
                !/[/.]/.test(block.with.workflow.split("@")[0]) && (
                <p><Link to={`/workflows/${encodeURIComponent(block.with.workflow.split("@")[0])}`}>
                  Open the nested workflow {block.with.workflow}</Link></p>)}
              <BlockForm block={block} schema={schema} problems={blockProblems} references={references}
                         siblings={graph.nodes.filter((n) => n.id !== block.id &&
                           n.parent === (graph.nodes.find((m) => m.id === block.id)?.parent ?? null)).map((n) => n.id)}
                         onAfter={(source, on) => change((doc) => setAfter(doc, block.id, source, on))}
                         onSet={(path, value) => change((doc) => setField(doc, block.id, path, value))}
                         onUnset={(path) => change((doc) => unsetField(doc, block.id, path))}
                         onRename={(to) => {
                           const refused = change((doc) => renameBlock(doc, block.id, to), true);
                           if (!refused) setSelected(to);
                           return refused;
                         }} />
              {text !== null && <BlockTest key={block.id} text={text} blockId={block.id}
                                           inputs={document?.inputs ?? {}} />}
              <details>
                <summary>As YAML</summary>
                <Json label="Block config" value={YAML.stringify(block, { lineWidth: 0 })} />
              </details>
              <div className="panel-actions">
                <button type="button" onClick={() => {
                  let copy = "";
                  if (!change((doc) => { copy = duplicateBlock(doc, block.id); }) && copy) setSelected(copy);
                }}>Duplicate the block</button>
                <button type="button" onClick={copySelected}
                        aria-keyshortcuts="Control+C Meta+C">Copy the block</button>
                <button type="button" onClick={() => {
                  change((doc) => removeBlock(doc, block.id));
                  setSelected(null);
                }}>Delete the block</button>
                <button type="button" onClick={() => setSelected(null)}>Close</button>
              </div>
            </aside>
          )}
        </section>
        <section className="editor-pane" aria-label="Editor">
          {initial !== null && (
            <Editor initial={initial} text={text ?? undefined}
                    onChange={(value) => { setText(value); setNotice(null); }}
                    history={history} onHistory={setDepth}
                    onChecked={(result: Checked) => {
                      setValid(result.valid);
                      setProblems(result.problems);
                      if (result.graph) setChecked(result.graph);
                    }} />
          )}
        </section>
      </div>
    </main>
  );
}
