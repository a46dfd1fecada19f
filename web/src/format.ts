// How the pages write times, durations and token counts: one place, so the
// run view, its timeline, the approval panel and the inbox read the same.

/** A moment as a reader of this page reads it: local date and time, to the second. */
export function when(moment: number | string | null | undefined): string {
  if (moment == null || moment === "") return "-";
  const date = typeof moment === "number" ? new Date(moment * 1000) : new Date(moment);
  if (Number.isNaN(date.getTime())) return String(moment);
  return date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" });
}

/** A duration in seconds: "0.4 ms", "120 ms", "3.2 s", "2 min 5 s". */
export function duration(seconds: number): string {
  const ms = seconds * 1000;
  if (ms < 10) return `${ms.toFixed(1)} ms`;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 2 : 1)} s`;
  return `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;
}

/** A block's usage tokens (`{total, prompt, completion}` or a number) as one line. */
export function formatTokens(tokens: any): string | null {
  if (tokens == null) return null;
  if (typeof tokens !== "object") return String(tokens);
  const total = tokens.total ?? tokens.total_tokens;
  const parts = Object.entries(tokens).filter(([key]) => !key.startsWith("total"))
    .map(([key, value]) => `${key} ${value}`);
  return `${total ?? "?"}${parts.length ? ` (${parts.join(", ")})` : ""}`;
}
