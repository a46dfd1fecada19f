// "Test this block": run the selected block alone (POST /api/block-tests) on
// the editor's text, saved or not. A field for each value the block reads
// (the server says which: POST /api/block-tests/reads), filled from the
// user's latest run of the workflow when there is one; then its output, each
// prompt as sent to the model, tokens and time, or its error. Nothing is
// stored: no run appears in the history.
import { useEffect, useId, useRef, useState } from "react";
import { api, ApiError, type Problem } from "../api";
import { Json, ProblemList, StatusBadge } from "./Common";

interface Read { reference: string; source: string; name: string; field: string | null; value?: unknown }
interface Described { runnable: boolean; reason: string | null; reads: Read[]; run_id: string | null }
interface Tested {
  status: string; output: unknown; error: string | null; duration_ms: number | null;
  tokens: { prompt: number; completion: number; total: number };
  requests: { model?: string; messages: { role: string; content: unknown }[] }[];
}

/** What a field shows for a value: text as it is, anything else as JSON. */
function shown(value: unknown): string {
  return value === undefined ? "" : typeof value === "string" ? value : JSON.stringify(value);
}

/** What a field's text sends: JSON when it parses as JSON (a number, a list,
 * an object), else the text; an input declared as a string is always text. */
function parsed(text: string, asText: boolean): unknown {
  if (asText) return text;
  try { return JSON.parse(text); } catch { return text; }
}

function about(read: Read): string {
  if (read.source === "block") return read.field ? `field ${read.field} of block ${read.name}'s output`
                                                 : `the whole output of block ${read.name}`;
  return { input: "a workflow input", vars: "a variable (the document's value unless changed)",
           memory: "a memory key (your stored memory unless given)",
           loop: "the loop's pass (index, item, previous)" }[read.source] ?? read.source;
}

export function BlockTest(props: { text: string; blockId: string; inputs: Record<string, any> }) {
  const [open, setOpen] = useState(false);
  const [described, setDescribed] = useState<Described | null>(null);
  const [values, setValues] = useState<Record<string, string>>({});
  const [lastRun, setLastRun] = useState<Record<string, string>>({});
  const [result, setResult] = useState<Tested | null>(null);
  const [error, setError] = useState<{ message: string; problems: Problem[] } | null>(null);
  const [busy, setBusy] = useState(false);
  const baseId = useId();
  const asked = useRef(0);

  // what the block reads, again whenever the text changes while the section is open
  useEffect(() => {
    if (!open) return;
    const ask = ++asked.current;
    const timer = setTimeout(async () => {
      try {
        const answer = await api<Described>("POST", "/api/block-tests/reads", {
          json: { document: props.text, block_id: props.blockId, last_run: true } });
        if (ask !== asked.current) return;
        const filled: Record<string, string> = {};
        answer.reads.forEach((read) => { filled[read.reference] = shown(read.value); });
        setDescribed(answer);
        setLastRun(filled);
        setValues((typed) => Object.fromEntries(answer.reads.map((read) => [
          read.reference, typed[read.reference] ?? filled[read.reference]])));
        setError(null);
      } catch (err) {
        if (ask !== asked.current) return;
        const e = err as ApiError;
        setDescribed(null);
        setError({ message: `The block cannot be tested yet: ${e.message}`, problems: e.details ?? [] });
      }
    }, described ? 500 : 0);
    return () => clearTimeout(timer);
  }, [open, props.text, props.blockId]);

  async function run() {
    if (!described) return;
    const samples: Record<string, Record<string, unknown>> = { input: {}, vars: {}, memory: {}, loop: {}, blocks: {} };
    for (const read of described.reads) {
      const text = values[read.reference] ?? "";
      if (text === "") continue;
      const declared = read.source === "input" ? props.inputs?.[read.name] : null;
      const value = parsed(text, read.source === "input" && (declared?.type ?? "string") === "string");
      if (read.source !== "block") samples[read.source][read.name] = value;
      else if (read.field === null) samples.blocks[read.name] = value;
      else samples.blocks[read.name] = { ...(samples.blocks[read.name] as object ?? {}), [read.field]: value };
    }
    setBusy(true);
    setError(null);
    setResult(null);
    try {
      setResult(await api<Tested>("POST", "/api/block-tests", {
        json: { document: props.text, block_id: props.blockId, samples } }));
    } catch (err) {
      const e = err as ApiError;
      setError({ message: e.message, problems: e.details ?? [] });
    } finally {
      setBusy(false);
    }
  }

  return (
    <details className="block-test" open={open}
             onToggle={(event) => setOpen((event.target as HTMLDetailsElement).open)}>
      <summary>Test this block</summary>
      <section aria-label={`Test block ${props.blockId}`}>
        <p className="muted">Runs this block alone with the values below; nothing else runs and
          nothing is stored. Numbers, lists and objects are read as JSON, anything else as text.</p>
        {described && !described.runnable && <p className="error">{described.reason}</p>}
        {described?.runnable && (
          <form aria-label={`Values block ${props.blockId} reads`}
                onSubmit={(event) => { event.preventDefault(); run(); }}>
            {described.reads.length === 0 && <p className="muted">This block reads no other values.</p>}
            {described.reads.map((read, index) => (
              <div key={read.reference} className="field">
                <label htmlFor={`${baseId}-${index}`}><code>{read.reference}</code></label>
                <textarea id={`${baseId}-${index}`} rows={2} spellCheck={false}
                          aria-describedby={`${baseId}-${index}-about`}
                          value={values[read.reference] ?? ""}
                          onChange={(event) => setValues({ ...values, [read.reference]: event.target.value })} />
                <p id={`${baseId}-${index}-about`} className="muted field-about">{about(read)}</p>
              </div>
            ))}
            <div className="panel-actions">
              <button type="submit" disabled={busy}>{busy ? "Running..." : "Run this block"}</button>
              {described.run_id && (
                <button type="button" onClick={() => setValues({ ...lastRun })}>
                  Use last run</button>
              )}
            </div>
            {described.run_id && <p className="muted">Filled from your latest run of this workflow
              ({described.run_id}).</p>}
          </form>
        )}
        <div role="status" aria-live="polite">
          {result && <p>Result: <StatusBadge status={result.status} /></p>}
        </div>
        {error && <div role="alert" className="error">{error.message}<ProblemList problems={error.problems} /></div>}
        {result && (
          <div className="block-test-result">
            {result.error && <p role="alert" className="error">{result.error}</p>}
            <dl className="facts">
              <dt>Time</dt><dd>{result.duration_ms != null ? `${Math.round(result.duration_ms)} ms` : "-"}</dd>
              <dt>Tokens</dt><dd>{result.tokens.total
                ? `${result.tokens.total} (${result.tokens.prompt} prompt, ${result.tokens.completion} completion)`
                : "-"}</dd>
            </dl>
            {result.status === "succeeded" && <><h3>Output</h3><Json label="Test output" value={result.output} /></>}
            {result.requests.map((request, index) => (
              <div key={index} className="call">
                <h3>Prompt {index + 1}, as sent{request.model ? ` (${request.model})` : ""}</h3>
                <ol className="messages" aria-label={`Prompt ${index + 1} messages`}>
                  {request.messages.map((message, at) => (
                    <li key={at}><strong>{message.role}</strong>
                      <pre className="json" tabIndex={0}>{shown(message.content)}</pre></li>
                  ))}
                </ol>
              </div>
            ))}
          </div>
        )}
      </section>
    </details>
  );
}
