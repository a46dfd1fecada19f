// The workflow's own settings as a form: id, name, description, typed inputs
// (added, removed, typed, a default, required or not), variables and the
// default model (from GET /api/models: what this user may use). Each field
// is written when it is left or Enter pressed: one edit of the text each.
import { useEffect, useId, useState } from "react";
import YAML from "yaml";

const TYPES = ["string", "number", "integer", "boolean", "array", "object"];

export interface SettingsActions {
  /** Set a field (`["inputs", "query", "type"]`), or remove it with undefined; the refusal, if any. */
  onSet: (path: string[], value: unknown) => string | null;
  onRenameEntry: (section: "inputs" | "variables", from: string, to: string) => string | null;
  onAdd: (section: "inputs" | "variables") => void;
}

/** A text written when left or Enter pressed; a refusal shows under it. */
function CommitText(props: { label: string; value: string; about?: string; disabled?: boolean;
                             onCommit: (value: string) => string | null }) {
  const [draft, setDraft] = useState(props.value);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => { setDraft(props.value); setError(null); }, [props.value]);
  const id = useId();
  const commit = () => { if (draft !== props.value) setError(props.onCommit(draft)); };
  return (
    <div className="field">
      <label htmlFor={id}>{props.label}</label>
      <input id={id} type="text" value={draft} disabled={props.disabled} spellCheck={false}
             aria-invalid={error ? true : undefined}
             aria-describedby={props.about ? `${id}-about` : undefined}
             onChange={(event) => setDraft(event.target.value)} onBlur={commit}
             onKeyDown={(event) => { if (event.key === "Enter") { event.preventDefault(); commit(); } }} />
      {props.about && <p id={`${id}-about`} className="muted field-about">{props.about}</p>}
      {error && <p className="field-problem" role="alert">{error}</p>}
    </div>
  );
}

const shown = (value: unknown) => value === undefined || value === null ? "" : typeof value === "string" ? value
  : YAML.stringify(value, { lineWidth: 0, collectionStyle: "flow" }).trimEnd();

/** The text of a default as a value of `type`; throws saying why not. */
function typed(text: string, type: string): unknown {
  if (type === "string" || !type) return text;
  const value = YAML.parse(text === "" ? ({ number: "0", integer: "0", boolean: "false",
                                            array: "[]", object: "{}" } as any)[type] ?? "" : text);
  const ok = { number: typeof value === "number", integer: Number.isInteger(value),
               boolean: typeof value === "boolean", array: Array.isArray(value),
               object: value !== null && typeof value === "object" && !Array.isArray(value) } as any;
  if (ok[type] === false) throw new Error(`'${text}' is not a${type === "integer" || type === "array" || type === "object" ? "n" : ""} ${type}`);
  return value;
}

function InputRow(props: { name: string; spec: any } & SettingsActions) {
  const { name, spec } = props;
  const type = typeof spec?.type === "string" ? spec.type : "string";
  const required = !(spec && typeof spec === "object" && "default" in spec);
  const typeId = useId();
  const requiredId = useId();
  const setDefault = (text: string) => {
    try { return props.onSet(["inputs", name, "default"], typed(text, type)); }
    catch (err) { return (err as Error).message; }
  };
  return (
    <div role="group" aria-label={`Input ${name}`} className="settings-row">
      <CommitText label="name" value={name}
                  onCommit={(to) => props.onRenameEntry("inputs", name, to.trim())} />
      <div className="field">
        <label htmlFor={typeId}>type</label>
        <select id={typeId} value={type} onChange={(event) => props.onSet(["inputs", name, "type"],
                                                                          event.target.value)}>
          {TYPES.map((t) => <option key={t} value={t}>{t}</option>)}
        </select>
      </div>
      <CommitText label="default" value={required ? "" : shown(spec.default)} disabled={required}
                  onCommit={setDefault} />
      <div className="field checkbox">
        <input id={requiredId} type="checkbox" checked={required}
               onChange={(event) => event.target.checked
                 ? props.onSet(["inputs", name, "default"], undefined) : setDefault("")} />
        <label htmlFor={requiredId}>required</label>
      </div>
      <button type="button" onClick={() => props.onSet(["inputs", name], undefined)}>
        Remove input {name}</button>
    </div>
  );
}

export function SettingsForm(props: { document: any; models: string[] } & SettingsActions) {
  const { document } = props;
  const inputs = document?.inputs && typeof document.inputs === "object" ? document.inputs : {};
  const variables = document?.variables && typeof document.variables === "object" ? document.variables : {};
  const model = typeof document?.defaults?.model === "string" ? document.defaults.model : "";
  const modelId = useId();
  const text = (label: string, key: string, about?: string) => (
    <CommitText label={label} value={typeof document?.[key] === "string" ? document[key] : ""} about={about}
                onCommit={(value) => props.onSet([key], value.trim() === "" && key !== "id" ? undefined : value.trim())} />
  );
  const models = model && !props.models.includes(model) ? [model, ...props.models] : props.models;
  return (
    <form className="block-form settings-form" aria-label="Workflow settings"
          onSubmit={(event) => event.preventDefault()}>
      {text("Workflow id", "id", "Runs, versions and nested workflow blocks refer to it.")}
      {text("Name", "name")}
      {text("Description", "description")}
      <fieldset>
        <legend>Inputs</legend>
        {Object.keys(inputs).length === 0 && <p className="muted">No inputs: a run takes none.</p>}
        {Object.entries<any>(inputs).map(([name, spec]) => (
          <InputRow key={name} name={name} spec={spec} {...props} />
        ))}
        <button type="button" onClick={() => props.onAdd("inputs")}>Add an input</button>
      </fieldset>
      <fieldset>
        <legend>Variables</legend>
        {Object.entries<any>(variables).map(([name, value]) => (
          <div key={name} role="group" aria-label={`Variable ${name}`} className="settings-row">
            <CommitText label="name" value={name}
                        onCommit={(to) => props.onRenameEntry("variables", name, to.trim())} />
            <CommitText label="value" value={shown(value)}
                        onCommit={(to) => props.onSet(["variables", name], to)} />
            <button type="button" onClick={() => props.onSet(["variables", name], undefined)}>
              Remove variable {name}</button>
          </div>
        ))}
        <button type="button" onClick={() => props.onAdd("variables")}>Add a variable</button>
      </fieldset>
      <div className="field">
        <label htmlFor={modelId}>Default model</label>
        <select id={modelId} value={model} aria-describedby={`${modelId}-about`}
                onChange={(event) => props.onSet(["defaults", "model"], event.target.value || undefined)}>
          <option value="">(the server's default)</option>
          {models.map((m) => <option key={m} value={m}>{m}</option>)}
        </select>
        <p id={`${modelId}-about`} className="muted field-about">
          For every LLM block that names no model of its own; only models you may use are listed.</p>
      </div>
    </form>
  );
}
