// An approval block in the run view: what is asked and the data to decide on;
// while the run waits for it, Approve / Reject with a comment; once decided,
// who decided, when and why.
import { useState } from "react";
import { api } from "../api";
import { Json, StatusBadge } from "../components/Common";
import { when } from "../format";
import type { Decided, Live } from "./runState";

/** Send a decision to the server's approval route; the answer's `status` is the run's. */
export async function decideApproval(runId: string, blockId: string, decision: "approve" | "reject",
                                     comment = ""): Promise<{ status: string }> {
  return api<{ status: string }>(
    "POST", `/api/runs/${encodeURIComponent(runId)}/approvals/${encodeURIComponent(blockId)}`,
    { json: { decision, ...(comment.trim() ? { comment: comment.trim() } : {}) } });
}

export function ApprovalPanel({ runId, blockId, live, stored, runStatus, onDecided, onError }: {
  runId: string; blockId: string; live: Live; stored: any; runStatus: string;
  onDecided: (answer: { status: string }) => void; onError: (message: string) => void;
}) {
  const [comment, setComment] = useState("");
  const [sending, setSending] = useState(false);
  const output = (stored?.output ?? live.output ?? {}) as any;
  const message = live.approval?.message ?? output.message;
  const data = live.approval?.data !== undefined ? live.approval.data : output.data;
  const decided: Decided | null = output.decision ? output : live.decided ?? null;
  const open = live.state === "waiting" && runStatus === "waiting" && !decided;

  async function decide(decision: "approve" | "reject") {
    setSending(true);
    try {
      onDecided(await decideApproval(runId, blockId, decision, comment));
    } catch (err) {
      onError((err as Error).message);
    } finally {
      setSending(false);
    }
  }

  return (
    <section className="approval" aria-label="Approval">
      <h3>Approval</h3>
      {message !== undefined && <p className="approval-message">{String(message)}</p>}
      {data !== undefined && data !== null && <Json label="Data to decide on" value={data} />}
      {!decided && live.approval?.timeout_at ? <p className="muted deadline">If nobody decides by{" "}
        {when(live.approval.timeout_at)}, {live.approval.default
          ? `it is ${live.approval.default === "approve" ? "approved" : "rejected"} by default`
          : "the block fails"}.</p> : null}
      {decided && (
        <p className="decision" aria-label="Decision">
          <StatusBadge status={decided.decision === "approve" ? "approved" : "rejected"} />{" "}
          {decided.timed_out ? "by default (nobody decided in time)" : `by ${decided.by ?? "?"}`}
          {decided.at ? `, ${when(decided.at)}` : ""}
          {decided.comment ? <>: <q>{decided.comment}</q></> : null}
        </p>
      )}
      {open && (
        <form className="approval-form" onSubmit={(event) => event.preventDefault()}>
          <label htmlFor="approval-comment">Comment (optional)</label>
          <textarea id="approval-comment" rows={3} value={comment}
                    onChange={(event) => setComment(event.target.value)} />
          <div className="toolbar">
            <button type="button" disabled={sending} onClick={() => decide("approve")}>Approve</button>
            <button type="button" disabled={sending} className="danger"
                    onClick={() => decide("reject")}>Reject</button>
          </div>
        </form>
      )}
    </section>
  );
}
