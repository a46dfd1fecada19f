// The YAML editor: CodeMirror 6, checked by the server's validator as you
// type (POST /api/validate). Each problem is underlined at its line and listed
// below with its line number; while the text is valid the graph follows it.
// The canvas and the block forms change the same text: `text` is written into
// the editor as one change (undo takes it back), the cursor kept.
import { useEffect, useRef, useState } from "react";
import { EditorState } from "@codemirror/state";
import { EditorView, keymap, lineNumbers, highlightActiveLine } from "@codemirror/view";
import {
  defaultKeymap, history, historyKeymap, isolateHistory, redo, redoDepth, undo, undoDepth,
} from "@codemirror/commands";
import { yaml } from "@codemirror/lang-yaml";
import { syntaxHighlighting, defaultHighlightStyle } from "@codemirror/language";
import { linter, lintGutter, type Diagnostic } from "@codemirror/lint";
import { api, type Problem } from "../api";
import type { WorkflowGraph } from "../layout";

export interface Checked {
  valid: boolean;
  problems: Problem[];
  graph: WorkflowGraph | null;
}

/** The one history of the document: typing, canvas and form edits alike. */
export interface History {
  undo: () => void;
  redo: () => void;
}

export function Editor(props: {
  initial: string;
  text?: string;
  onChange: (text: string) => void;
  onChecked: (checked: Checked) => void;
  /** Filled with the editor's undo and redo, for the page's buttons and keys. */
  history?: React.MutableRefObject<History | null>;
  /** How many steps undo and redo can take now. */
  onHistory?: (depth: { undo: number; redo: number }) => void;
}) {
  const host = useRef<HTMLDivElement>(null);
  const viewRef = useRef<EditorView | null>(null);
  const [problems, setProblems] = useState<Problem[] | null>(null);
  const callbacks = useRef(props);
  callbacks.current = props;

  useEffect(() => {
    const check = linter(async (view) => {
      const text = view.state.doc.toString();
      let checked: Checked;
      try {
        checked = await api<Checked>("POST", "/api/validate", { text, type: "application/yaml" });
      } catch (error) {
        checked = { valid: false, graph: null,
                    problems: [{ where: "", message: String((error as Error).message), line: 1 }] };
      }
      if (view.state.doc.toString() !== text) return [];      // typed since: a newer check follows
      setProblems(checked.problems);
      callbacks.current.onChecked(checked);
      return checked.problems.map((problem): Diagnostic => {
        const line = view.state.doc.line(Math.min(Math.max(problem.line ?? 1, 1),
                                                  view.state.doc.lines));
        return { from: line.from, to: line.to, severity: "error",
                 message: problem.where ? `${problem.where}: ${problem.message}` : problem.message };
      });
    }, { delay: 350 });
    const view = new EditorView({
      parent: host.current!,
      state: EditorState.create({
        doc: props.initial,
        extensions: [
          lineNumbers(), highlightActiveLine(), history(), yaml(), EditorView.lineWrapping,
          syntaxHighlighting(defaultHighlightStyle), lintGutter(), check,
          // Tab is left to the page (CodeMirror's accessibility guidance: no
          // focus trap); Ctrl/Cmd+] and [ indent, as the hint below says
          keymap.of([...defaultKeymap, ...historyKeymap]),
          EditorView.contentAttributes.of({ "aria-label": "Workflow YAML",
                                            "aria-describedby": "yaml-keys" }),
          EditorView.updateListener.of((update) => {
            if (update.docChanged) callbacks.current.onChange(update.state.doc.toString());
            if (update.transactions.length) {
              callbacks.current.onHistory?.({ undo: undoDepth(update.state), redo: redoDepth(update.state) });
            }
          }),
        ],
      }),
    });
    // axe: a scrollable region must be reachable by keyboard (its contenteditable
    // child is not counted), so the scroller itself takes focus too
    view.scrollDOM.tabIndex = 0;
    viewRef.current = view;
    if (props.history) props.history.current = { undo: () => undo(view), redo: () => redo(view) };
    callbacks.current.onHistory?.({ undo: 0, redo: 0 });
    return () => { viewRef.current = null; view.destroy(); };
    // the editor is created once per document loaded; `initial` changes re-create it
  }, [props.initial]);

  useEffect(() => {
    const view = viewRef.current;
    const wanted = props.text;
    if (!view || wanted === undefined) return;
    const current = view.state.doc.toString();
    if (current === wanted) return;
    let start = 0;
    while (start < current.length && start < wanted.length && current[start] === wanted[start]) start++;
    let end = 0;
    while (end < current.length - start && end < wanted.length - start &&
           current[current.length - 1 - end] === wanted[wanted.length - 1 - end]) end++;
    // one canvas or form action: one undo step of its own, never merged with the next
    view.dispatch({ changes: { from: start, to: current.length - end,
                               insert: wanted.slice(start, wanted.length - end) },
                    annotations: isolateHistory.of("full") });
  }, [props.text]);

  return (
    <div className="editor-wrap">
      <div ref={host} className="editor" />
      <p id="yaml-keys" className="muted editor-hint">Tab moves on to the next control;
        indent with Ctrl+] and outdent with Ctrl+[ (⌘ on a Mac).</p>
      {/* focusable: a long list scrolls, and must scroll from the keyboard too (axe) */}
      <div className="problems" role="status" aria-live="polite" tabIndex={0}>
        {problems === null ? <p className="muted">Checking...</p>
          : problems.length === 0 ? <p className="ok">No problems: the document is valid.</p>
          : (
            <ul aria-label="Problems">
              {problems.map((problem, index) => (
                <li key={index} className="problem">
                  <strong>line {problem.line}</strong>
                  {problem.where && <code>{problem.where}</code>} {problem.message}
                </li>
              ))}
            </ul>
          )}
      </div>
    </div>
  );
}
