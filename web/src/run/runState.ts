// A run's event stream folded into what the run view shows of each block:
// its state (and why), its passes (a block in a loop runs once per pass), its
// model calls as sent and answered, an approval's question and decision.  The
// events carry structured fields (`run_waiting`'s `pending`: held block ->
// the block it waits for), so nothing here reads an English sentence.
import type { RunEvent } from "../api";
import type { BlockState } from "../components/Graph";

export const STATE_OF: Record<string, BlockState> = {
  block_started: "running", block_succeeded: "succeeded", block_failed: "failed",
  block_skipped: "skipped", block_cancelled: "cancelled", block_waiting: "waiting",
};

/** Run statuses after which no event comes.  A `waiting` run is not one: the
 * view keeps following it, so a decision made elsewhere (another tab, the CLI)
 * or a wait that comes due shows up live. */
export const ENDED = new Set(["succeeded", "failed", "cancelled"]);

export interface Call { call: number; request?: any; response?: any; error?: string; model?: string; streamed: string }
export interface Approval { message?: string; data?: unknown; timeout_at?: number | null; default?: string | null }
export interface Decided { decision?: string; by?: string | null; at?: string; comment?: string | null; timed_out?: boolean }
/** One run of a block: a block inside a loop or a map runs once per pass (its scope). */
export interface Pass { scope: string | null; started: number; finished?: number; state: BlockState }
export interface Live {
  state: BlockState; reason?: string; started?: number; finished?: number;
  output?: unknown; error?: string; calls: Call[]; approval?: Approval; decided?: Decided;
  resumeAt?: number | null; passes: Pass[];
  /** Pending behind this waiting block (from `run_waiting`'s `pending`). */
  heldBy?: string;
}

export type Blocks = Record<string, Live>;

export const fresh = (): Live => ({ state: "pending", calls: [], passes: [] });

/** The tokens of a block's model calls, summed from their responses. */
export function tokensOf(calls: Call[]): string | null {
  let total = 0;
  for (const call of calls) {
    const usage = call.response?.usage ?? {};
    total += Number(usage.total ?? usage.total_tokens ?? 0);
  }
  return total ? String(total) : null;
}

/** Blocks held "pending" behind a waiting one, once the run ends without resuming:
 * they will not run, and the API says skipped. */
function release(blocks: Blocks, status: string): void {
  for (const block of Object.values(blocks)) {
    if (block.state === "pending" && block.heldBy !== undefined) {
      block.state = "skipped";
      block.reason = `the run ended ${status} before ${block.heldBy} was decided`;
      block.heldBy = undefined;
    }
  }
}

/** The stored record has the last word on an ended run's blocks the stream left
 * pending or waiting (a run cancelled while it waited emits no block events). */
export function settle(blocks: Blocks, detail: any): void {
  if (!ENDED.has(detail.status)) return;
  for (const [id, stored] of Object.entries<any>(detail.blocks ?? {})) {
    const block = blocks[id];
    const state = stored?.status as BlockState | undefined;
    if (block && state && state !== block.state && (block.state === "pending" || block.state === "waiting")) {
      block.state = state;
      if (stored.reason) block.reason = String(stored.reason);
    }
  }
}

/** Fold one event into the blocks' state (in place: the page copies the map
 * once per animation frame, not once per event). */
export function apply(blocks: Blocks, event: RunEvent): void {
  if (event.type === "run_finished" && event.status === "cancelled") {
    // a run cancelled while it waited gets no block events: its waiting blocks end here
    for (const block of Object.values(blocks)) {
      if (block.state === "waiting") { block.state = "cancelled"; block.reason = "the run was cancelled"; }
    }
  }
  if (event.type === "run_finished" && event.status) {
    release(blocks, event.status);
  }
  if (event.type === "run_waiting") {
    // the blocks held behind a waiting one, by id: they run when it is resumed
    for (const [held, waitingFor] of Object.entries<string>(event.pending ?? {})) {
      const block = (blocks[held] ??= fresh());
      block.state = "pending";
      block.heldBy = waitingFor;
      block.reason = `after ${waitingFor}`;
    }
    return;
  }
  const id = event.block_id;
  if (!id) return;
  const block = (blocks[id] ??= fresh());
  let state = STATE_OF[event.type];
  // an approval that settled rejecting: its `approval_decided` came just before
  if (state === "succeeded" && block.decided?.decision === "reject") state = "rejected";
  if (state) {
    block.state = state;
    block.heldBy = undefined;
    const scope = event.scope ?? null;
    if (event.type === "block_started") {
      block.started ??= event.time;
      block.decided = undefined;           // a new pass decides afresh
      block.reason = undefined;            // a block resumed after waiting starts afresh
      block.error = undefined;
      block.passes = [...block.passes, { scope, started: event.time, state }];
    }
    else {
      block.finished = event.time;
      const open = [...block.passes].reverse().find((p) => p.scope === scope && p.finished === undefined);
      if (open) { open.finished = event.time; open.state = state; block.passes = [...block.passes]; }
    }
    if (event.reason) block.reason = String(event.reason);
    if (event.error) block.error = typeof event.error === "string" ? event.error : JSON.stringify(event.error);
    if ("output" in event) block.output = event.output;
    if (event.type === "block_waiting") block.resumeAt = event.resume_at ?? null;
    return;
  }
  if (event.type === "approval_requested") {
    block.approval = { message: event.message, data: event.data, timeout_at: event.timeout_at,
                       default: event.default };
  } else if (event.type === "approval_decided") {
    block.decided = { decision: event.decision, by: event.by, at: event.at, comment: event.comment,
                      timed_out: event.timed_out };
  } else if (event.type === "llm_request") {
    block.calls = [...block.calls, { call: event.call, model: event.model, request: event.request, streamed: "" }];
  } else if (event.type === "llm_delta" || event.type === "llm_restart" || event.type === "llm_response") {
    const call = block.calls.find((c) => c.call === event.call) ?? block.calls[block.calls.length - 1];
    if (!call) return;
    if (event.type === "llm_delta") call.streamed += event.text ?? "";
    else if (event.type === "llm_restart") call.streamed = "";   // a cut stream: the answer starts again
    else { call.response = event.response; call.error = event.error; }
    block.calls = [...block.calls];
  }
}
