// Copy and paste of blocks. The copied block is YAML text (structureEdits.
// copyBlock) kept for the whole tab, so a block copied in one workflow
// pastes into another; it is also offered to the system clipboard, best
// effort, for pasting as text elsewhere. Ctrl/Cmd+C and +V act on blocks
// only where the page's own text copy would not: never in a text field, the
// YAML pane or a form, and never while text is selected on the page.
import { useEffect, useRef, useState } from "react";

let held: string | null = null;
const listeners = new Set<(text: string | null) => void>();

/** What the clipboard holds (YAML of blocks), or null, kept up to date. */
export function useHeldBlocks(): string | null {
  const [text, setText] = useState(held);
  useEffect(() => {
    listeners.add(setText);
    return () => { listeners.delete(setText); };
  }, []);
  return text;
}

export function holdBlocks(text: string): void {
  held = text;
  listeners.forEach((listener) => listener(text));
  // the system clipboard too, where the browser allows it (a secure page, focus)
  navigator.clipboard?.writeText(text).catch(() => undefined);
}

/** Where Ctrl/Cmd+C and +V keep their usual meaning: text fields, the
 * CodeMirror pane, and anywhere text is selected. */
function textCopyApplies(event: KeyboardEvent): boolean {
  const target = event.target as HTMLElement | null;
  if (target?.closest("input, textarea, select, [contenteditable='true'], .cm-editor")) return true;
  const selection = window.getSelection();
  return Boolean(selection && !selection.isCollapsed && selection.toString().trim());
}

/** Ctrl/Cmd+C calls `copy`, Ctrl/Cmd+V `paste`, outside text. */
export function useClipboardKeys(copy: () => void, paste: () => void): void {
  const actions = useRef({ copy, paste });
  actions.current = { copy, paste };
  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      if (!(event.ctrlKey || event.metaKey) || event.altKey || event.shiftKey) return;
      const key = event.key.toLowerCase();
      if ((key !== "c" && key !== "v") || textCopyApplies(event)) return;
      if (key === "c") actions.current.copy();        // the default copy stays (nothing selected)
      else { event.preventDefault(); actions.current.paste(); }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, []);
}
