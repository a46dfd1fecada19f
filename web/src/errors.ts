// An API error told in a form's terms: each located problem (`body.name`,
// `body.max_iterations`) under the label of the field the person filled in,
// with the API's own wording of what is wrong, never a request path.
import { ApiError } from "./api";

export function formError(err: unknown, labels: Record<string, string>): string {
  const details = err instanceof ApiError ? err.details : [];
  const located = details.filter((d) => d && typeof d.where === "string" && d.message);
  if (!located.length) return (err as Error).message;
  return located.map((d) => {
    const field = d.where.replace(/^body\./, "");
    const label = labels[field] ?? field;
    return `${label}: ${d.message.replace(/^Value error, /, "")}`;
  }).join(" ");
}
