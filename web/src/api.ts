// The public HTTP API, and nothing else: every call sends the API key kept in
// sessionStorage as `Authorization: Bearer`; a 401 clears it and goes back to
// sign-in. Errors are the API's `{error: {code, message, details}}`.
import { navigate } from "./router";

const KEY = "flowforge.key";

export function apiKey(): string | null {
  return sessionStorage.getItem(KEY);
}

export function setApiKey(key: string | null): void {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
}

export interface Problem {
  where: string;
  message: string;
  line?: number;
  capability?: string;
}

export class ApiError extends Error {
  constructor(public status: number, message: string, public details: Problem[] = [],
              public body: any = null) {
    super(message);
  }
}

type Body = { json?: unknown; text?: string; type?: string };

export async function api<T = any>(method: string, path: string, body?: Body): Promise<T> {
  const headers: Record<string, string> = { Accept: "application/json" };
  const key = apiKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  let payload: string | undefined;
  if (body?.json !== undefined) {
    headers["Content-Type"] = "application/json";
    payload = JSON.stringify(body.json);
  } else if (body?.text !== undefined) {
    headers["Content-Type"] = body.type ?? "application/yaml";
    payload = body.text;
  }
  const response = await fetch(path, { method, headers, body: payload });
  if (response.status === 401) {
    setApiKey(null);
    navigate("/signin");
    throw new ApiError(401, "your API key is missing, unknown or revoked: sign in again");
  }
  if (response.status === 204) return undefined as T;
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = data?.error ?? {};
    throw new ApiError(response.status, error.message ?? response.statusText, error.details ?? [], data);
  }
  return data as T;
}

export interface RunEvent {
  seq: number;
  type: string;
  block_id?: string;
  scope?: string;
  time: number;
  [field: string]: any;
}

/** Follow a run's SSE stream with fetch (EventSource cannot send the key).
 * Calls `onEvent` for every event until the stream ends (after `run_finished`,
 * or after a `run_waiting` that is the last event so far) or `signal` aborts. */
export async function followEvents(runId: string, after: number,
                                   onEvent: (event: RunEvent) => void,
                                   signal: AbortSignal): Promise<void> {
  const headers: Record<string, string> = { Accept: "text/event-stream" };
  const key = apiKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  const response = await fetch(`/api/runs/${encodeURIComponent(runId)}/events?after=${after}`,
                               { headers, signal });
  if (response.status === 401) {
    setApiKey(null);
    navigate("/signin");
    return;
  }
  if (!response.ok || !response.body) {
    const data = await response.json().catch(() => ({}));
    throw new ApiError(response.status, data?.error?.message ?? response.statusText);
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let data: string[] = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let newline: number;
    while ((newline = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, newline).replace(/\r$/, "");
      buffer = buffer.slice(newline + 1);
      if (line === "") {
        if (data.length) {
          const event = JSON.parse(data.join("\n")) as RunEvent;
          data = [];
          onEvent(event);
          if (event.type === "run_finished") {
            reader.cancel().catch(() => undefined);
            return;
          }
        }
      } else if (line.startsWith("data:")) {
        data.push(line.slice(5).replace(/^ /, ""));
      }
    }
  }
}
