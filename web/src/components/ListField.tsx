// The form's controls for list fields, so that no list needs YAML typed:
// a list of objects with named fields (a condition's cases, an evaluator's
// metrics) is edited item by item, each item a group of the same controls as
// a block's own fields, added and removed with buttons; a list of texts (a
// knowledge block's sources) is one text per line.
import { Fragment, type ReactElement, useEffect, useState } from "react";
import type { Problem } from "../api";
import type { Field } from "../schema";

/** What draws one field of an item (BlockForm's FieldControl); called, not
 * mounted, so that its element type stays the same across renders (a field
 * being typed in keeps the focus). */
export type Control = (props: { field: Field; value: unknown; problems: Problem[];
                                onSet: (value: unknown) => void; onUnset: () => void }) => ReactElement;

/** The problems of item `index`'s field `name` (`where` like `with.cases[1].when`). */
const problemsOf = (problems: Problem[], index: number, name: string) =>
  problems.filter((p) => new RegExp(`\\[${index}\\]\\.${name}($|[.[])`).test(p.where));

/** The problems of the list itself, not of a field of one of its items. */
export const ownProblems = (problems: Problem[]) => problems.filter((p) => !/\[\d+\]\.\w/.test(p.where));

const isItem = (item: unknown) => item !== null && typeof item === "object" && !Array.isArray(item);

/** Whether `value` can be shown by ListItems (else the field stays YAML). */
export function fitsList(value: unknown): boolean {
  return value === undefined || value === null || (Array.isArray(value) && value.every(isItem));
}

export function fitsLines(value: unknown): boolean {
  return value === undefined || value === null ||
    (Array.isArray(value) && value.every((item) => typeof item === "string" && !item.includes("\n")));
}

/** Each item a group ("cases 1") of its fields; "Add to cases" appends an
 * empty one (`{}`: its required fields are said missing under them, and
 * what is typed into it is written plain, not as the `""` of a blank). */
export function ListItems(props: { field: Field; value: unknown; labelledBy: string; render: Control;
                                   problems: Problem[];
                                   onSet: (value: unknown) => void; onUnset: () => void }) {
  const { field, render } = props;
  const list = Array.isArray(props.value) ? (props.value as Record<string, unknown>[]) : [];
  const write = (next: Record<string, unknown>[]) => (next.length ? props.onSet(next) : props.onUnset());
  return (
    <div className="list-field" role="group" aria-labelledby={props.labelledBy}>
      {list.map((item, index) => (
        <fieldset key={index} className="list-item">
          <legend>{`${field.name} ${index + 1}`}</legend>
          {(field.items ?? []).map((sub) => (
            <Fragment key={sub.name}>{render({
              field: sub, value: item[sub.name], problems: problemsOf(props.problems, index, sub.name),
              onSet: (value) => write(list.map((old, i) => (i === index ? { ...old, [sub.name]: value } : old))),
              onUnset: () => write(list.map((old, i) => {
                if (i !== index) return old;
                const { [sub.name]: _gone, ...rest } = old;
                return rest;
              })),
            })}</Fragment>
          ))}
          <button type="button" onClick={() => write(list.filter((_, i) => i !== index))}>
            {`Remove ${field.name} ${index + 1}`}</button>
        </fieldset>
      ))}
      <button type="button" onClick={() => write([...list, {}])}>{`Add to ${field.name}`}</button>
    </div>
  );
}

/** A list of texts, one per line, written when the field is left (a half-typed
 * line is not written); empty lines are dropped. */
export function Lines(props: { common: Record<string, unknown>; value: unknown;
                               onSet: (value: unknown) => void; onUnset: () => void }) {
  const render = (v: unknown) => (Array.isArray(v) ? v.join("\n") : "");
  const [draft, setDraft] = useState(render(props.value));
  useEffect(() => setDraft(render(props.value)), [JSON.stringify(props.value)]);
  const commit = () => {
    const items = draft.split("\n").map((line) => line.trim()).filter(Boolean);
    if (!items.length) { if (props.value !== undefined) props.onUnset(); return; }
    if (JSON.stringify(items) !== JSON.stringify(props.value)) props.onSet(items);
  };
  return <textarea {...props.common} rows={Math.min(8, Math.max(2, draft.split("\n").length))}
                   spellCheck={false} value={draft} placeholder="one per line"
                   onChange={(event) => setDraft(event.target.value)} onBlur={commit} />;
}
