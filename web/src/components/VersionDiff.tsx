// Two saved versions of a workflow side by side as a line diff of their
// texts (as the author wrote them): what changed between any two saves.
import { useEffect, useId, useState } from "react";
import { diffLines } from "diff";
import { api } from "../api";

export function VersionDiff(props: { id: string; versions: number[] }) {
  const { versions } = props;
  const [from, setFrom] = useState(versions[versions.length - 2] ?? versions[0]);
  const [to, setTo] = useState(versions[versions.length - 1]);
  const [texts, setTexts] = useState<[string, string] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const fromId = useId();
  const toId = useId();
  useEffect(() => {
    let live = true;
    const text = (v: number) => api<any>("GET", `/api/workflows/${encodeURIComponent(props.id)}?version=${v}`)
      .then((row) => String(row.source ?? JSON.stringify(row.document, null, 2)));
    Promise.all([text(from), text(to)]).then((both) => { if (live) { setTexts(both); setError(null); } },
                                             (err) => { if (live) setError(String(err.message)); });
    return () => { live = false; };
  }, [props.id, from, to]);
  const parts = texts ? diffLines(texts[0], texts[1]) : [];
  const changed = parts.some((part) => part.added || part.removed);
  return (
    <section className="version-diff" aria-label="Differences between versions">
      <label htmlFor={fromId}>From version</label>
      <select id={fromId} value={from} onChange={(event) => setFrom(Number(event.target.value))}>
        {versions.map((v) => <option key={v} value={v}>version {v}</option>)}
      </select>
      <label htmlFor={toId}>To version</label>
      <select id={toId} value={to} onChange={(event) => setTo(Number(event.target.value))}>
        {versions.map((v) => <option key={v} value={v}>version {v}</option>)}
      </select>
      {error && <p role="alert" className="error">{error}</p>}
      {texts && !changed && <p>The two versions have the same text.</p>}
      {texts && changed && (
        <pre className="diff" tabIndex={0} aria-label={`Changes from version ${from} to version ${to}`}>
          {parts.flatMap((part, index) => part.value.replace(/\n$/, "").split("\n").map((line, k) => {
            const mark = part.added ? "+" : part.removed ? "-" : " ";
            const Tag = part.added ? "ins" : part.removed ? "del" : "span";
            return <Tag key={`${index}-${k}`} className="diff-line">{`${mark} ${line}\n`}</Tag>;
          }))}
        </pre>
      )}
    </section>
  );
}
