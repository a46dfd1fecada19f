import type { Problem } from "../api";

export function StatusBadge({ status }: { status: string }) {
  return <span className={`badge status-${status.replace(/\s+/g, "-")}`}>{status}</span>;
}

export function ProblemList({ problems }: { problems: Problem[] }) {
  if (!problems.length) return null;
  return (
    <ul className="problem-list">
      {problems.map((p, i) => (
        <li key={i}>{p.line ? <strong>line {p.line} </strong> : null}
          {p.where && <code>{p.where}</code>} {p.message}</li>
      ))}
    </ul>
  );
}

export function Json({ value, label }: { value: unknown; label: string }) {
  return (
    <pre className="json" aria-label={label} tabIndex={0}>
      {typeof value === "string" ? value : JSON.stringify(value, null, 2)}
    </pre>
  );
}

/** A table that may be wider than a phone: it scrolls inside its own region
 * (which the keyboard can focus and scroll), never the page sideways. */
export function Wide({ label, children }: { label: string; children: React.ReactNode }) {
  return <div className="table-scroll" role="region" aria-label={label} tabIndex={0}>{children}</div>;
}

/** A description written in the manual's Markdown (`code`) as text with code
 * spans: no raw backticks on screen. */
export function Prose({ text }: { text: string }) {
  return <>{text.split(/(`[^`]+`)/).map((part, index) =>
    /^`[^`]+`$/.test(part) ? <code key={index}>{part.slice(1, -1)}</code> : part)}</>;
}
