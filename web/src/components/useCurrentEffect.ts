// An effect that fetches for values the user can change (a filter, an id, a
// version): `current()` turns false once those values change again or the
// page is left, so an answer that lands late is dropped, never shown for the
// newer values (the runs list once showed the succeeded run under "failed"
// when the older filter's answer came back last).
import { useEffect, type DependencyList } from "react";

export function useCurrentEffect(fetch: (current: () => boolean) => void,
                                 deps: DependencyList): void {
  useEffect(() => {
    let live = true;
    fetch(() => live);
    return () => { live = false; };
  }, deps);    // eslint-disable-line react-hooks/exhaustive-deps
}
