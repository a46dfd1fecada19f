// The parsed document's block tree as the editor page reads it: where a
// block is (its spec, its path for the server's problems, at any depth) and
// the stored document as the YAML a person writes. Plain functions over the
// parsed value, apart from the page so that it reads as the page.

/** The stored document (every default written out) as the YAML a person
 * writes: empty `after: []`, `with: {}`, `blocks: []` and top-level empty
 * sections are left out; nothing inside a block's `with` is touched. */
export function readable(document: any): any {
  const empty = (value: unknown) => (Array.isArray(value) && value.length === 0) ||
    (value !== null && typeof value === "object" && !Array.isArray(value) && Object.keys(value).length === 0);
  const block = (spec: any): any => Object.fromEntries(Object.entries(spec)
    .filter(([, value]) => !empty(value))
    .map(([key, value]) => [key, key === "blocks" && Array.isArray(value) ? value.map(block) : value]));
  const top = Object.fromEntries(Object.entries(document ?? {}).filter(([, value]) => !empty(value)));
  if (Array.isArray(top.blocks)) top.blocks = top.blocks.map(block);
  return top;
}

/** A block of the parsed document by id, at any depth (inside loops and maps). */
export function findBlock(blocks: any[] | undefined, id: string): any | null {
  for (const block of blocks ?? []) {
    if (block?.id === id) return block;
    const inner = findBlock(block?.blocks, id);
    if (inner) return inner;
  }
  return null;
}

/** id -> `blocks[2]` / `blocks[4].blocks[0]`: where the server's problems point. */
export function blockPaths(blocks: any[] | undefined, prefix = "", out: Record<string, string> = {}) {
  (blocks ?? []).forEach((block, index) => {
    if (!block || typeof block.id !== "string") return;
    out[block.id] = `${prefix}blocks[${index}]`;
    blockPaths(block.blocks, `${prefix}blocks[${index}].`, out);
  });
  return out;
}

/** id -> the block's spec, at any depth. */
export function specsById(blocks: any[] | undefined, out: Record<string, any> = {}) {
  for (const block of blocks ?? []) {
    if (!block || typeof block.id !== "string") continue;
    out[block.id] = block;
    specsById(block.blocks, out);
  }
  return out;
}
