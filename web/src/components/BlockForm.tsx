// A block's settings as a form drawn from its config schema (types, choices,
// defaults, descriptions, required fields). A field left empty is absent from
// the document (no default is written in); a changed field is one text edit.
// Template fields complete `{{block.field}}` from the blocks upstream; the
// server's problems for a field (an expression that does not parse, an
// unknown reference) show under it as you type.
import { useEffect, useId, useRef, useState } from "react";
import YAML from "yaml";
import type { Problem } from "../api";
import { ANY_VALUE, configSchema, fields, shapeProblem, type Field, type Schema } from "../schema";
import { Prose } from "./Common";
import { fitsLines, fitsList, Lines, ListItems, ownProblems } from "./ListField";
import { fitsMap, MapRows, ownMapProblems } from "./MapField";

export interface FormActions {
  onSet: (path: string[], value: unknown) => void;
  onUnset: (path: string[]) => void;
  /** Rename the block; the reason when refused (a taken or reserved id). */
  onRename: (to: string) => string | null;
  /** Add or remove a block of the same container in this one's `after:`. */
  onAfter: (source: string, on: boolean) => void;
}

export function BlockForm(props: {
  block: any;
  schema: Schema | null;
  problems: Problem[];            // this block's, `where` relative to the block (`with.prompt`)
  references: string[];           // what `{{` may complete to: `input.query`, `search.context`
  siblings: string[];             // the blocks it may run after (same container)
} & FormActions) {
  const { block, schema, problems } = props;
  const type = typeof block.type === "string" ? block.type : block.uses ? "registry" : "";
  const config = schema ? configSchema(schema, type) : null;
  const list = config ? fields(schema!, config) : [];
  const own = (name: string) => problems.filter((p) => p.where === name || p.where.startsWith(`${name}.`) ||
                                                       p.where.startsWith(`${name}[`));
  const top: Field[] = [
    { name: "name", kind: "text", required: false, expression: false,
      description: "What the canvas shows (templates may use its normalised form too)." },
    { name: "description", kind: "text", required: false, expression: false,
      description: "One line for whoever reads the workflow." },
  ];
  const free = config && !list.length && config.additionalProperties !== false;
  return (
    <form className="block-form" aria-label={`Settings of ${block.id}`}
          onSubmit={(event) => event.preventDefault()}>
      <IdField id={block.id} onRename={props.onRename} />
      <RunsAfter block={block} siblings={props.siblings} onAfter={props.onAfter} />
      {top.map((field) => (
        <FieldControl key={field.name} blockId={block.id} field={field} value={block[field.name]}
                      problems={own(field.name)} references={props.references}
                      onSet={(value) => props.onSet([field.name], value)}
                      onUnset={() => props.onUnset([field.name])} />
      ))}
      {!schema && <p className="muted">Loading the block's settings...</p>}
      {schema && !config && <p className="muted">Unknown block type '{type}': edit it in the YAML.</p>}
      {list.map((field) => (
        <FieldControl key={field.name} blockId={block.id} field={field} value={block.with?.[field.name]}
                      schema={schema}
                      problems={own(`with.${field.name}`)} references={props.references}
                      onSet={(value) => props.onSet(["with", field.name], value)}
                      onUnset={() => props.onUnset(["with", field.name])} />
      ))}
      {free && (
        <FieldControl blockId={block.id} value={block.with}
                      schema={schema}
                      field={{ name: "with", kind: "map", values: ANY_VALUE, required: false, expression: false,
                               description: String(config.description ?? "Any fields, as YAML."),
                               prop: config }}
                      problems={own("with")} references={props.references}
                      onSet={(value) => props.onSet(["with"], value)}
                      onUnset={() => props.onUnset(["with"])} />
      )}
    </form>
  );
}

function FieldControl(props: {
  blockId: string;
  field: Field;
  value: unknown;
  schema?: Schema | null;
  problems: Problem[];
  references: string[];
  onSet: (value: unknown) => void;
  onUnset: () => void;
}) {
  const { field, value, problems } = props;
  const id = useId();
  const describedBy = `${id}-about`;
  const shown = field.default === undefined || field.default === null ? ""
    : ` (default: ${JSON.stringify(field.default)})`;
  const list = field.kind === "list" && fitsList(value);
  const map = field.kind === "map" && fitsMap(value, field.values ?? []);
  const label = (
    <label htmlFor={list || map ? undefined : id} id={`${id}-label`}>
      {field.name}{field.required && <span className="required"> (required)</span>}
    </label>
  );
  const about = (
    <>
      <p id={describedBy} className="muted field-about"><Prose text={field.description} />{shown}</p>
      {(list ? ownProblems(problems) : map ? ownMapProblems(problems, value) : problems).map((problem, index) => (
        <p key={index} className="field-problem" role="alert">{problem.message}</p>
      ))}
    </>
  );
  const common = {
    id, "aria-describedby": describedBy, "aria-invalid": problems.length > 0 || undefined,
    "aria-required": field.required || undefined,
  };
  let control;
  if (field.kind === "choice" || field.kind === "boolean") {
    const choices = field.kind === "boolean" ? ["true", "false"] : field.choices ?? [];
    control = (
      <select {...common} value={value === undefined || value === null ? "" : String(value)}
              onChange={(event) => {
                const chosen = event.target.value;
                if (chosen === "") props.onUnset();
                else props.onSet(field.kind === "boolean" ? chosen === "true" : chosen);
              }}>
        <option value="">{field.default !== undefined && field.default !== null
          ? `default (${String(field.default)})` : "(not set)"}</option>
        {choices.map((choice) => <option key={choice} value={choice}>{choice}</option>)}
      </select>
    );
  } else if ((field.kind === "text" || field.kind === "long-text") &&
             (value === undefined || value === null || typeof value === "string")) {
    control = <TemplateText common={common} long={field.kind === "long-text"}
                            value={typeof value === "string" ? value : ""}
                            references={props.references}
                            onChange={(text) => (text === "" ? props.onUnset() : props.onSet(text))} />;
  } else if (list) {
    control = <ListItems field={field} value={value} labelledBy={`${id}-label`} problems={problems}
                         onSet={props.onSet} onUnset={props.onUnset}
                         render={(sub) => <FieldControl blockId={props.blockId}
                                                         references={props.references} {...sub} />} />;
  } else if (map) {
    control = <MapRows field={field} value={value} labelledBy={`${id}-label`} problems={problems}
                       onSet={props.onSet} onUnset={props.onUnset}
                       text={(common, text, onChange) => (
                         <TemplateText common={common} long={false} value={text}
                                       references={props.references} onChange={onChange} />)} />;
  } else if (field.kind === "lines" && fitsLines(value)) {
    control = <Lines common={common} value={value} onSet={props.onSet} onUnset={props.onUnset} />;
  } else {
    control = <Committed common={common} field={field} value={value} onSet={props.onSet}
                         onUnset={props.onUnset} schema={props.schema ?? null} />;
  }
  return <div className={`field${field.expression ? " expression" : ""}`}>{label}{control}{about}</div>;
}

/** A number or a YAML value, checked as it is typed (a moment after the
 * last key): a draft that does not parse, or whose shape the block's schema
 * refuses (`metrics[0]: 'name' is missing`), is shown as a problem under
 * the field and never written; a valid one is written then (and when the
 * field is left), so a half-typed `1.` or `[a,` never reaches the document. */
function Committed(props: { common: Record<string, unknown>; field: Field; value: unknown;
                            schema: Schema | null;
                            onSet: (value: unknown) => void; onUnset: () => void }) {
  const { field, value } = props;
  const numeric = field.kind === "number" || field.kind === "integer";
  const render = (v: unknown) => v === undefined || v === null ? ""
    : numeric ? String(v) : YAML.stringify(v, { lineWidth: 0 }).trimEnd();
  const [draft, setDraft] = useState(render(value));
  const [error, setError] = useState<string | null>(null);
  const editing = useRef(false);
  const timer = useRef<number | undefined>(undefined);
  // the document changed elsewhere (undo, the YAML pane): shown, unless this
  // field is being typed in (its own write must not reformat the draft)
  useEffect(() => { if (!editing.current) { setDraft(render(value)); setError(null); } },
            [JSON.stringify(value)]);
  useEffect(() => () => window.clearTimeout(timer.current), []);
  /** The value of `text`, or the problem that keeps it out of the document. */
  const check = (text: string): { value?: unknown; problem?: string } => {
    let parsed: unknown;
    try {
      parsed = numeric ? Number(text) : YAML.parse(text);
      if (numeric && !Number.isFinite(parsed as number)) throw new Error("not a number");
      if (field.kind === "integer" && !Number.isInteger(parsed)) throw new Error("not a whole number");
    } catch (err) {
      return { problem: `${field.name}: ${(err as Error).message.split("\n")[0]}` };
    }
    const shape = props.schema && field.prop && parsed !== null
      ? shapeProblem(props.schema, field.prop, parsed, field.name) : null;
    return shape ? { problem: shape } : { value: parsed };
  };
  const commit = (text: string) => {
    window.clearTimeout(timer.current);
    if (text.trim() === "") { setError(null); if (value !== undefined) props.onUnset(); return; }
    const checked = check(text);
    setError(checked.problem ?? null);
    if (checked.problem === undefined && JSON.stringify(checked.value) !== JSON.stringify(value)) {
      props.onSet(checked.value);
    }
  };
  const type = (text: string) => {
    setDraft(text);
    window.clearTimeout(timer.current);
    timer.current = window.setTimeout(() => commit(text), 400);
  };
  const handlers = {
    onFocus: () => { editing.current = true; },
    onBlur: () => { editing.current = false; commit(draft); },
  };
  const common = { ...props.common, "aria-invalid": (error ? true : props.common["aria-invalid"]) as boolean | undefined };
  return (
    <>
      {numeric
        ? <input {...common} type="text" inputMode="decimal" value={draft} {...handlers}
                 onChange={(event) => type(event.target.value)}
                 onKeyDown={(event) => { if (event.key === "Enter") commit(draft); }} />
        : <textarea {...common} rows={Math.min(8, Math.max(2, draft.split("\n").length))}
                    className="yaml-field" spellCheck={false} value={draft} {...handlers}
                    onChange={(event) => type(event.target.value)} />}
      {error && <p className="field-problem" role="alert">{error}</p>}
    </>
  );
}

/** Text with `{{` completion: after `{{` (and what follows it), the
 * references that match are listed; Up/Down choose, Enter or Tab insert. */
function TemplateText(props: { common: Record<string, unknown>; long: boolean; value: string;
                               references: string[]; onChange: (text: string) => void }) {
  const ref = useRef<HTMLTextAreaElement & HTMLInputElement>(null);
  const [caret, setCaret] = useState<number | null>(null);
  const [active, setActive] = useState(0);
  const [closed, setClosed] = useState(false);
  const listId = `${String(props.common.id)}-refs`;
  const before = caret === null ? "" : props.value.slice(0, caret);
  const open = /\{\{\s*([A-Za-z0-9_.-]*)$/.exec(before);
  const options = open && !closed
    ? props.references.filter((r) => r.toLowerCase().startsWith(open[1].toLowerCase())).slice(0, 12) : [];
  const insert = (reference: string) => {
    if (!open || caret === null) return;
    const start = caret - open[1].length;
    const rest = props.value.slice(caret);
    const close = rest.startsWith("}}") ? "" : "}}";
    const text = props.value.slice(0, start) + reference + close + rest;
    props.onChange(text);
    const at = start + reference.length + 2;
    requestAnimationFrame(() => {
      ref.current?.setSelectionRange(at, at);
      setCaret(at);
    });
  };
  const track = () => { setCaret(ref.current?.selectionStart ?? null); };
  const attributes = {
    ...props.common, ref, value: props.value, spellCheck: false,
    "aria-autocomplete": "list" as const, "aria-controls": options.length ? listId : undefined,
    "aria-activedescendant": options.length ? `${listId}-${Math.min(active, options.length - 1)}` : undefined,
    onChange: (event: React.ChangeEvent<HTMLTextAreaElement | HTMLInputElement>) => {
      props.onChange(event.target.value);
      setCaret(event.target.selectionStart);
      setClosed(false);
      setActive(0);
    },
    onKeyUp: (event: React.KeyboardEvent) => {
      if (!["ArrowUp", "ArrowDown", "Enter", "Tab", "Escape"].includes(event.key)) track();
    },
    onClick: track,
    onBlur: () => setCaret(null),
    onKeyDown: (event: React.KeyboardEvent) => {
      if (!options.length) return;
      if (event.key === "ArrowDown") { event.preventDefault(); setActive((active + 1) % options.length); }
      else if (event.key === "ArrowUp") { event.preventDefault(); setActive((active + options.length - 1) % options.length); }
      else if (event.key === "Enter" || event.key === "Tab") {
        event.preventDefault();
        insert(options[Math.min(active, options.length - 1)]);
      } else if (event.key === "Escape") { event.preventDefault(); setClosed(true); }
    },
  };
  return (
    <div className="template-field">
      {props.long ? <textarea {...attributes} rows={Math.min(10, Math.max(3, props.value.split("\n").length + 1))} />
                  : <input {...attributes} type="text" />}
      {options.length > 0 && (
        <ul role="listbox" id={listId} className="completions" aria-label="References">
          {options.map((option, index) => (
            <li key={option} id={`${listId}-${index}`} role="option"
                aria-selected={index === Math.min(active, options.length - 1)}
                onMouseDown={(event) => { event.preventDefault(); insert(option); }}>
              {`{{${option}}}`}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

/** The block's id, renamed when the field is left or Enter pressed: every
 * reference to it follows (structureEdits.renameBlock), in one edit. */
function IdField(props: { id: string; onRename: (to: string) => string | null }) {
  const [draft, setDraft] = useState(props.id);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => { setDraft(props.id); setError(null); }, [props.id]);
  const fieldId = useId();
  const commit = () => {
    const wanted = draft.trim();
    if (wanted === props.id) { setError(null); return; }
    setError(props.onRename(wanted));
  };
  return (
    <div className="field">
      <label htmlFor={fieldId}>id</label>
      <input id={fieldId} type="text" value={draft} spellCheck={false}
             aria-describedby={`${fieldId}-about`} aria-invalid={error ? true : undefined}
             onChange={(event) => setDraft(event.target.value)} onBlur={commit}
             onKeyDown={(event) => { if (event.key === "Enter") { event.preventDefault(); commit(); } }} />
      <p id={`${fieldId}-about`} className="muted field-about">
        How other blocks refer to this one: renaming updates every reference.</p>
      {error && <p className="field-problem" role="alert">{error}</p>}
    </div>
  );
}

/** "Runs after": a checkbox per block of the same container, the keyboard's
 * way to draw an `after:` edge (dragging a handle needs a pointer). */
function RunsAfter(props: { block: any; siblings: string[]; onAfter: (source: string, on: boolean) => void }) {
  const after: string[] = Array.isArray(props.block.after) ? props.block.after.map(String) : [];
  const join = props.block.after && !Array.isArray(props.block.after);
  if (!props.siblings.length) return null;
  return (
    <fieldset className="runs-after">
      <legend>Runs after</legend>
      {join ? <p className="muted">A join (<code>all</code> / <code>any</code>): edit it in the YAML.</p>
        : props.siblings.map((sibling) => (
          <label key={sibling} className="check">
            <input type="checkbox" checked={after.includes(sibling)}
                   onChange={(event) => props.onAfter(sibling, event.target.checked)} />
            {sibling}
          </label>
        ))}
    </fieldset>
  );
}
