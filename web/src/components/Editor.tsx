// The YAML editor: CodeMirror 6, checked by the server's validator as you
// type (POST /api/validate). Each problem is underlined at its line and listed
// below with its line number; while the text is valid the graph follows it.
import { useEffect, useRef, useState } from "react";
import { EditorState } from "@codemirror/state";
import { EditorView, keymap, lineNumbers, highlightActiveLine } from "@codemirror/view";
import { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
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

export function Editor(props: {
  initial: string;
  onChange: (text: string) => void;
  onChecked: (checked: Checked) => void;
}) {
  const host = useRef<HTMLDivElement>(null);
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
          keymap.of([...defaultKeymap, ...historyKeymap, indentWithTab]),
          EditorView.contentAttributes.of({ "aria-label": "Workflow YAML" }),
          EditorView.updateListener.of((update) => {
            if (update.docChanged) callbacks.current.onChange(update.state.doc.toString());
          }),
        ],
      }),
    });
    // axe: a scrollable region must be reachable by keyboard (its contenteditable
    // child is not counted), so the scroller itself takes focus too
    view.scrollDOM.tabIndex = 0;
    return () => view.destroy();
    // the editor is created once per document loaded; `initial` changes re-create it
  }, [props.initial]);

  return (
    <div className="editor-wrap">
      <div ref={host} className="editor" />
      <div className="problems" role="status" aria-live="polite">
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
