// The form's control for a mapping with free keys (a knowledge block's
// filters, a set block's keys, a template's variables, headers), so that no
// mapping needs YAML typed: a row per key, its value as text by default (a
// template like `{{search.results}}` stays text), and a small type choice
// where the schema allows more (a list one item per line, a number, true or
// false). A choice, not a guess from what was typed: `3` or `[a, b]` typed
// into a text stays that text, as a Sim or Dify user expects of a text box,
// and what a value becomes is on screen beside it. A key empty or used twice
// is flagged beside its row, and nothing is written until it is fixed (the
// YAML keeps its last good state); a row with neither key nor value is just
// not written yet. A value these controls cannot show (a nested mapping, an
// `{expr: ...}`) leaves the whole field to the YAML textarea (fitsMap).
import { type ReactElement, useEffect, useId, useRef, useState } from "react";
import type { Problem } from "../api";
import type { Field, ValueKind } from "../schema";

/** What draws a text value (BlockForm's TemplateText, with `{{` completion);
 * called, not mounted, so that a value being typed keeps the focus. */
export type TextControl = (common: Record<string, unknown>, value: string,
                           onChange: (text: string) => void) => ReactElement;

const LABELS: Record<ValueKind, string> = {
  text: "text", number: "number", integer: "whole number", list: "list", boolean: "true/false",
};

/** The kind a value is shown as, or null when the row controls cannot show it. */
function kindOf(value: unknown, kinds: ValueKind[]): ValueKind | null {
  const has = (kind: ValueKind) => kinds.includes(kind);
  if (typeof value === "string") return has("text") && !value.includes("\n") ? "text" : null;
  if (typeof value === "number") {
    return has("number") ? "number" : has("integer") && Number.isInteger(value) ? "integer" : null;
  }
  if (typeof value === "boolean") return has("boolean") ? "boolean" : null;
  if (Array.isArray(value) && has("list") &&
      value.every((item) => typeof item === "string" && item.trim() === item && item !== "" &&
                            !item.includes("\n"))) {
    return "list";
  }
  return null;
}

/** Whether `value` can be shown as rows (else the field stays YAML). */
export function fitsMap(value: unknown, kinds: ValueKind[]): boolean {
  if (value === undefined || value === null) return true;
  if (typeof value !== "object" || Array.isArray(value)) return false;
  return Object.values(value as Record<string, unknown>).every((item) => kindOf(item, kinds) !== null);
}

interface Row { uid: number; key: string; kind: ValueKind; draft: string }

const draftOf = (value: unknown) => (Array.isArray(value) ? value.join("\n") : String(value));

/** A row's value as written, or why it cannot be. */
function parse(row: Row): { value: unknown } | { error: string } {
  if (row.kind === "list") return { value: row.draft.split("\n").map((line) => line.trim()).filter(Boolean) };
  if (row.kind === "boolean") return { value: row.draft === "true" };
  if (row.kind === "number" || row.kind === "integer") {
    const number = Number(row.draft);
    if (row.draft.trim() === "" || !Number.isFinite(number)) return { error: "the value is not a number" };
    if (row.kind === "integer" && !Number.isInteger(number)) return { error: "the value is not a whole number" };
    return { value: number };
  }
  return { value: row.draft };
}

const pending = (row: Row) => row.key.trim() === "" && row.draft.trim() === "";

/** What is wrong with each row (by uid): an empty or repeated key, a value that does not parse. */
function rowErrors(rows: Row[]): Map<number, string> {
  const errors = new Map<number, string>();
  const counts = new Map<string, number>();
  for (const row of rows) counts.set(row.key.trim(), (counts.get(row.key.trim()) ?? 0) + 1);
  for (const row of rows) {
    if (pending(row)) continue;
    const key = row.key.trim();
    const parsed = parse(row);
    if (key === "") errors.set(row.uid, "this row has no key: type one, or remove the row");
    else if ((counts.get(key) ?? 0) > 1) errors.set(row.uid, `the key '${key}' is used twice: rename one`);
    else if ("error" in parsed) errors.set(row.uid, parsed.error);
  }
  return errors;
}

/** The server's problems about key `key` (`where` like `with.filters.category`). */
const problemsOf = (problems: Problem[], key: string) => problems.filter((p) => {
  const escaped = key.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return key !== "" && new RegExp(`\\.${escaped}($|[.[])`).test(p.where);
});

/** The problems of the mapping itself, not of one of its keys. */
export function ownMapProblems(problems: Problem[], value: unknown): Problem[] {
  const keys = value && typeof value === "object" ? Object.keys(value) : [];
  return problems.filter((p) => !keys.some((key) => problemsOf([p], key).length));
}

let nextUid = 1;

export function MapRows(props: { field: Field; value: unknown; labelledBy: string; problems: Problem[];
                                 text: TextControl;
                                 onSet: (value: unknown) => void; onUnset: () => void }) {
  const { field } = props;
  const kinds = field.values ?? ["text"];
  const fresh = kinds[0];
  const id = useId();
  const fromValue = (value: unknown, old: Row[]): Row[] =>
    Object.entries(value && typeof value === "object" ? value as Record<string, unknown> : {})
      .map(([key, item], index) => ({ uid: old[index]?.uid ?? nextUid++, key,
                                      kind: kindOf(item, kinds) ?? fresh, draft: draftOf(item) }));
  const [rows, setRows] = useState<Row[]>(() => fromValue(props.value, []));
  // what this control wrote last: the document coming back with it is no news
  // (rows being typed, or added and not yet keyed, stay as they are)
  const written = useRef(JSON.stringify(props.value ?? null));
  useEffect(() => {
    const now = JSON.stringify(props.value ?? null);
    if (now === written.current) return;
    written.current = now;
    setRows((old) => fromValue(props.value, old));
  }, [JSON.stringify(props.value ?? null)]);

  const errors = rowErrors(rows);
  /** Write `next` into the document: one edit, only when every row is whole. */
  const write = (next: Row[]) => {
    setRows(next);
    if (rowErrors(next).size) return;
    const entries = next.filter((row) => !pending(row))
      .map((row) => [row.key.trim(), (parse(row) as { value: unknown }).value] as const);
    const value = Object.fromEntries(entries);
    const json = JSON.stringify(entries.length ? value : null);
    if (json === JSON.stringify(props.value ?? null)) return;
    written.current = json;
    if (entries.length) props.onSet(value);
    else props.onUnset();
  };
  const change = (uid: number, patch: Partial<Row>, commit: boolean) => {
    const next = rows.map((row) => (row.uid === uid ? { ...row, ...patch } : row));
    if (commit) write(next);
    else setRows(next);
  };
  const retype = (row: Row, kind: ValueKind): Partial<Row> => {
    let draft = row.draft;
    if (kind === "list" && row.kind !== "list") draft = draft.split(",").map((item) => item.trim()).join("\n");
    else if (kind !== "list" && row.kind === "list") draft = draft.split("\n").filter(Boolean).join(", ");
    if (kind === "boolean") draft = draft === "false" ? "false" : "true";
    return { kind, draft };
  };

  return (
    <div className="map-field" role="group" aria-labelledby={props.labelledBy}>
      {rows.map((row, index) => {
        const name = `${field.name} ${index + 1}`;
        const error = errors.get(row.uid);
        const problems = problemsOf(props.problems, row.key.trim());
        const about = `${id}-${row.uid}-about`;
        const keyError = Boolean(error) && !error!.startsWith("the value");
        const described = error || problems.length ? about : undefined;
        const common = { id: `${id}-${row.uid}-value`, "aria-label": "value",
                         "aria-invalid": (Boolean(error) && !keyError) || problems.length > 0 || undefined,
                         "aria-describedby": described };
        const commitKey = () => write(rows);
        let control: ReactElement;
        if (row.kind === "text") {
          control = props.text(common, row.draft, (text) => change(row.uid, { draft: text }, true));
        } else if (row.kind === "boolean") {
          control = (
            <select {...common} value={row.draft}
                    onChange={(event) => change(row.uid, { draft: event.target.value }, true)}>
              <option value="true">true</option>
              <option value="false">false</option>
            </select>
          );
        } else if (row.kind === "list") {
          control = <textarea {...common} rows={Math.min(6, Math.max(2, row.draft.split("\n").length))}
                              spellCheck={false} placeholder="one per line" value={row.draft}
                              onChange={(event) => change(row.uid, { draft: event.target.value }, false)}
                              onBlur={() => write(rows)} />;
        } else {
          control = <input {...common} type="text" inputMode="decimal" value={row.draft}
                           onChange={(event) => change(row.uid, { draft: event.target.value }, false)}
                           onBlur={() => write(rows)}
                           onKeyDown={(event) => { if (event.key === "Enter") write(rows); }} />;
        }
        return (
          <div key={row.uid} className="map-row" role="group" aria-label={name}>
            <input type="text" className="map-key" aria-label="key" placeholder="key" spellCheck={false}
                   value={row.key} aria-invalid={keyError || undefined} aria-describedby={described}
                   onChange={(event) => change(row.uid, { key: event.target.value }, false)}
                   onBlur={commitKey}
                   onKeyDown={(event) => { if (event.key === "Enter") { event.preventDefault(); commitKey(); } }} />
            <div className="map-value">{control}</div>
            {kinds.length > 1 && (
              <select className="map-kind" aria-label="type" value={row.kind}
                      onChange={(event) => write(rows.map((r) => (r.uid === row.uid
                        ? { ...r, ...retype(r, event.target.value as ValueKind) } : r)))}>
                {kinds.map((kind) => <option key={kind} value={kind}>{LABELS[kind]}</option>)}
              </select>
            )}
            <button type="button" aria-label={`Remove ${name}`}
                    onClick={() => write(rows.filter((r) => r.uid !== row.uid))}>Remove</button>
            {(error || problems.length > 0) && (
              <div id={about} className="map-problems">
                {error && <p className="field-problem" role="alert">{error}</p>}
                {problems.map((problem, at) => (
                  <p key={at} className="field-problem" role="alert">{problem.message}</p>
                ))}
              </div>
            )}
          </div>
        );
      })}
      <button type="button" onClick={() => setRows([...rows, { uid: nextUid++, key: "", kind: fresh, draft: "" }])}>
        {`Add a key to ${field.name}`}</button>
    </div>
  );
}
