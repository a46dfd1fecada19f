// Text written by people for people (a workflow's or block's description, an
// input's help): `backticks` mark code, as in the docstrings and YAML they
// come from, so they are shown as code, not as raw backticks.

/** The text with each `quoted` stretch as <code>; an unpaired backtick stays as it is. */
export function Prose({ text }: { text: string }) {
  const parts = text.split(/`([^`\n]+)`/);
  return <>{parts.map((part, i) => i % 2 ? <code key={i}>{part}</code> : part)}</>;
}
