// Start a run: a form generated from the workflow's declared inputs (type,
// default, description), checked by the server like any API call.
import { useState } from "react";
import { api, ApiError, type Problem } from "../api";
import { useCurrentEffect } from "../components/useCurrentEffect";
import { navigate } from "../router";
import { ProblemList } from "../components/Common";
import { Prose } from "../components/Prose";

type Schema = { type?: string; default?: unknown; description?: string; enum?: unknown[] };

function initialValue(schema: Schema): string | boolean {
  if (schema.type === "boolean") return Boolean(schema.default);
  if (schema.default === undefined) return "";
  return typeof schema.default === "string" ? schema.default : JSON.stringify(schema.default);
}

function parse(schema: Schema, raw: string | boolean): unknown {
  if (schema.type === "boolean") return raw;
  const text = String(raw);
  if (schema.type === "string" || schema.type === undefined) return text;
  if (schema.type === "number" || schema.type === "integer") return text === "" ? undefined : Number(text);
  try { return JSON.parse(text); } catch { return text; }
}

export function RunForm({ id }: { id: string }) {
  const [inputs, setInputs] = useState<Record<string, Schema> | null>(null);
  const [values, setValues] = useState<Record<string, string | boolean>>({});
  const [name, setName] = useState(id);
  const [error, setError] = useState<{ message: string; problems: Problem[] } | null>(null);

  useCurrentEffect((current) => {
    api<any>("GET", `/api/workflows/${encodeURIComponent(id)}`).then((row) => {
      if (!current()) return;
      const declared: Record<string, Schema> = row.document?.inputs ?? {};
      setName(row.document?.name ?? id);
      setInputs(declared);
      setValues(Object.fromEntries(Object.entries(declared).map(([k, s]) => [k, initialValue(s)])));
    }).catch((err) => { if (current()) setError({ message: err.message, problems: [] }); });
  }, [id]);

  async function start(event: React.FormEvent) {
    event.preventDefault();
    setError(null);
    const body: Record<string, unknown> = {};
    for (const [key, schema] of Object.entries(inputs ?? {})) {
      const value = parse(schema, values[key]);
      if (value !== undefined && !(value === "" && schema.default === undefined && schema.type !== "string")) {
        body[key] = value;
      }
    }
    try {
      const started = await api<any>("POST", `/api/workflows/${encodeURIComponent(id)}/runs`,
                                     { json: { inputs: body } });
      navigate(`/runs/${started.run_id}`);
    } catch (err) {
      const e = err as ApiError;
      setError({ message: e.message, problems: e.details ?? [] });
    }
  }

  return (
    <main>
      <h1>Run {name}</h1>
      {error && <div role="alert" className="error">{error.message}<ProblemList problems={error.problems} /></div>}
      {inputs && (
        <form className="run-form" onSubmit={start}>
          {Object.keys(inputs).length === 0 && <p>This workflow takes no inputs.</p>}
          {Object.entries(inputs).map(([key, schema]) => (
            <div className="field" key={key}>
              <label htmlFor={`input-${key}`}>{key} <span className="muted">({schema.type ?? "any"})</span></label>
              {schema.description && <p className="muted" id={`help-${key}`}><Prose text={schema.description} /></p>}
              {schema.type === "boolean" ? (
                <input id={`input-${key}`} type="checkbox" checked={Boolean(values[key])}
                       onChange={(e) => setValues({ ...values, [key]: e.target.checked })} />
              ) : schema.enum ? (
                <select id={`input-${key}`} value={String(values[key])}
                        onChange={(e) => setValues({ ...values, [key]: e.target.value })}>
                  {schema.enum.map((option) => <option key={String(option)}>{String(option)}</option>)}
                </select>
              ) : schema.type === "number" || schema.type === "integer" ? (
                <input id={`input-${key}`} type="number" value={String(values[key])}
                       step={schema.type === "integer" ? 1 : "any"}
                       aria-describedby={schema.description ? `help-${key}` : undefined}
                       onChange={(e) => setValues({ ...values, [key]: e.target.value })} />
              ) : (
                <textarea id={`input-${key}`} rows={schema.type === "string" || !schema.type ? 2 : 4}
                          value={String(values[key])}
                          aria-describedby={schema.description ? `help-${key}` : undefined}
                          onChange={(e) => setValues({ ...values, [key]: e.target.value })} />
              )}
            </div>
          ))}
          <button type="submit">Start the run</button>
        </form>
      )}
    </main>
  );
}
