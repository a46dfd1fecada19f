// A tiny client-side router on the History API: the server answers index.html
// for every client route, so deep links and reloads work.
import { useSyncExternalStore } from "react";

const listeners = new Set<() => void>();

/** A page with unsaved work says so here: `navigate` (and the Back button)
 * then ask before leaving; a reload or a closed tab asks through the browser. */
let leaveWarning: (() => string | null) | null = null;

export function setLeaveWarning(warning: (() => string | null) | null): void {
  leaveWarning = warning;
}

function mayLeave(): boolean {
  const message = leaveWarning?.();
  return !message || window.confirm(message);
}

window.addEventListener("beforeunload", (event) => {
  if (leaveWarning?.()) event.preventDefault();
});

let shown = location.pathname + location.search;

window.addEventListener("popstate", () => {
  const wanted = location.pathname + location.search;
  if (wanted !== shown && leaveWarning?.() && !mayLeave()) {
    history.pushState(null, "", shown);           // stay: the URL goes back to this page
    return;
  }
  shown = wanted;
}, true);

export function navigate(path: string, replace = false): void {
  if (path === location.pathname + location.search) return;
  if (!mayLeave()) return;
  shown = path;
  if (replace) history.replaceState(null, "", path);
  else history.pushState(null, "", path);
  listeners.forEach((listener) => listener());
}

function subscribe(listener: () => void): () => void {
  listeners.add(listener);
  window.addEventListener("popstate", listener);
  return () => {
    listeners.delete(listener);
    window.removeEventListener("popstate", listener);
  };
}

const snapshot = () => location.pathname + location.search;

export function useLocation(): { path: string; query: URLSearchParams } {
  // useSyncExternalStore re-reads the URL after subscribing, so a navigation made
  // before the first subscription (the sign-in redirect) is not missed
  const current = useSyncExternalStore(subscribe, snapshot);
  const url = new URL(current, location.origin);
  return { path: url.pathname, query: url.searchParams };
}

/** `match("/runs/:id", "/runs/abc")` -> `{id: "abc"}`, or null. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const want = pattern.split("/");
  const got = path.replace(/\/+$/, "").split("/");
  if (want.length !== got.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    if (want[i].startsWith(":")) params[want[i].slice(1)] = decodeURIComponent(got[i]);
    else if (want[i] !== got[i]) return null;
  }
  return params;
}

export function Link(props: { to: string; children: React.ReactNode; className?: string }) {
  return (
    <a href={props.to} className={props.className}
       onClick={(event) => {
         if (event.metaKey || event.ctrlKey || event.shiftKey || event.button !== 0) return;
         event.preventDefault();
         navigate(props.to);
       }}>
      {props.children}
    </a>
  );
}
