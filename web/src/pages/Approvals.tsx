// The approvals inbox: every approval that waits for a decision this user may
// make (the user's own waiting runs; an admin's, everyone's), each with what
// is asked, the data to decide on, a comment and Approve / Reject, which call
// the same route as the run view (`POST /api/runs/{id}/approvals/{block}`).
import { useEffect, useState } from "react";
import { api } from "../api";
import { Link } from "../router";
import { Json } from "../components/Common";
import { when } from "../format";
import { decideApproval } from "../run/ApprovalPanel";

interface Asking {
  runId: string; workflowId: string; version?: number; blockId: string;
  message?: string; data?: unknown; requestedAt?: number | string; timeoutAt?: number | null;
}

/** The approval blocks that wait in the runs that wait: one request per run. */
async function waitingApprovals(): Promise<Asking[]> {
  const { runs } = await api<{ runs: any[] }>("GET", "/api/runs?status=waiting&limit=100");
  const details = await Promise.all(runs.map((run) =>
    api<any>("GET", `/api/runs/${encodeURIComponent(run.run_id)}`).catch(() => null)));
  const found: Asking[] = [];
  for (const detail of details) {
    if (!detail || detail.status !== "waiting") continue;
    for (const [blockId, block] of Object.entries<any>(detail.blocks ?? {})) {
      if (block?.type !== "approval" || block.status !== "waiting") continue;
      const asked = block.output ?? {};
      found.push({ runId: detail.run_id, workflowId: detail.workflow_id, version: detail.workflow_version,
                   blockId, message: asked.message, data: asked.data,
                   requestedAt: asked.requested_at ?? block.started_at, timeoutAt: asked.timeout_at });
    }
  }
  return found;
}

export function Approvals() {
  const [items, setItems] = useState<Asking[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);

  useEffect(() => {
    waitingApprovals().then(setItems).catch((err) => setError(err.message));
  }, []);

  function decided(item: Asking, decision: "approve" | "reject") {
    setItems((list) => (list ?? []).filter((x) => x !== item));
    setNotice(`${decision === "approve" ? "Approved" : "Rejected"} ${item.blockId} of ` +
              `${item.workflowId}: the run goes on.`);
  }

  return (
    <main>
      <h1>Approvals</h1>
      <p className="muted">The runs that wait for your decision.</p>
      {notice && <p role="status" className="ok">{notice}</p>}
      {error && <p role="alert" className="error">{error}</p>}
      {items === null ? <p>Loading...</p> : items.length === 0 ? <p>No approvals wait for you.</p> : (
        <ul className="inbox">
          {items.map((item) => <li key={`${item.runId}/${item.blockId}`}>
            <Decide item={item} onDecided={(decision) => decided(item, decision)} onError={setError} />
          </li>)}
        </ul>
      )}
    </main>
  );
}

function Decide({ item, onDecided, onError }: {
  item: Asking; onDecided: (decision: "approve" | "reject") => void; onError: (message: string) => void;
}) {
  const [comment, setComment] = useState("");
  const [sending, setSending] = useState(false);
  const label = `${item.blockId} of ${item.workflowId} (run ${item.runId.slice(0, 12)})`;
  const field = `comment-${item.runId}-${item.blockId}`;

  async function decide(decision: "approve" | "reject") {
    setSending(true);
    try {
      await decideApproval(item.runId, item.blockId, decision, comment);
      onDecided(decision);
    } catch (err) {
      onError(`${label}: ${(err as Error).message}`);
      setSending(false);
    }
  }

  return (
    <article className="inbox-item" aria-label={`Approval ${label}`}>
      <h2>{item.message ?? "Approve?"}</h2>
      <p className="muted">
        Block <code>{item.blockId}</code> of <Link to={`/runs/${encodeURIComponent(item.runId)}`}>
          run <code>{item.runId.slice(0, 12)}</code></Link> ({item.workflowId}
        {item.version ? ` v${item.version}` : ""}), asked {when(item.requestedAt)}
        {item.timeoutAt ? `; decided by default at ${when(item.timeoutAt)}` : ""}.
      </p>
      {item.data !== undefined && item.data !== null &&
        <Json label={`Data to decide on for ${label}`} value={item.data} />}
      <div className="approval-form">
        <label htmlFor={field}>Comment (optional)</label>
        <textarea id={field} rows={2} value={comment} onChange={(event) => setComment(event.target.value)} />
        <div className="toolbar">
          <button type="button" disabled={sending} onClick={() => decide("approve")}
                  aria-label={`Approve ${label}`}>Approve</button>
          <button type="button" disabled={sending} className="danger" onClick={() => decide("reject")}
                  aria-label={`Reject ${label}`}>Reject</button>
        </div>
      </div>
    </article>
  );
}
