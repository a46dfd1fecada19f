// A file imported from another tool (POST /api/import), handed from the
// workflows list to the new workflow's editor: nothing is saved until the
// author saves it there.
export interface Imported {
  filename: string;
  format: string;
  yaml: string;
  report: unknown;
}

let pending: Imported | null = null;

export function setImported(imported: Imported): void { pending = imported; }

/** The import waiting for the editor, once. */
export function takeImported(): Imported | null {
  const taken = pending;
  pending = null;
  return taken;
}
