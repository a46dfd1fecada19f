// The palette behind "Add block": every block type of the document schema and
// every registry block this user may use, each with its one-line description,
// narrowed by a search over names and descriptions.
import { useEffect, useRef, useState } from "react";
import { api } from "../api";
import { blockKinds, type Schema } from "../schema";
import { Prose } from "./Common";

export interface Pick { type?: string; uses?: string }

interface RegistryBlock { id: string; name?: string; description?: string }

export function Palette(props: { schema: Schema | null; onPick: (pick: Pick) => void;
                                 onClose: () => void }) {
  const [search, setSearch] = useState("");
  const [registry, setRegistry] = useState<RegistryBlock[]>([]);
  const box = useRef<HTMLInputElement>(null);
  useEffect(() => {
    box.current?.focus();
    api<{ blocks: RegistryBlock[] }>("GET", "/api/blocks")
      .then((data) => setRegistry(data.blocks ?? [])).catch(() => setRegistry([]));
  }, []);
  const wanted = search.trim().toLowerCase();
  const fits = (...texts: (string | undefined)[]) =>
    !wanted || texts.some((text) => (text ?? "").toLowerCase().includes(wanted));
  const kinds = props.schema ? blockKinds(props.schema).filter((k) => k.type !== "registry" &&
                                                                   fits(k.type, k.description)) : [];
  const blocks = registry.filter((b) => fits(b.id, b.name, b.description));
  return (
    <div role="dialog" aria-label="Add a block" className="palette nokey"
         onKeyDown={(event) => { if (event.key === "Escape") props.onClose(); }}>
      <div className="palette-head">
        <label htmlFor="palette-search">Search block types</label>
        <input id="palette-search" ref={box} type="search" value={search}
               placeholder="agent, search, approve..." onChange={(event) => setSearch(event.target.value)} />
        <button type="button" onClick={props.onClose}>Close the palette</button>
      </div>
      {!props.schema && <p>Loading the block types...</p>}
      <h3 id="palette-types">Block types</h3>
      <ul aria-labelledby="palette-types" className="palette-list">
        {kinds.map((kind) => (
          <li key={kind.type}>
            <button type="button" aria-describedby={`palette-about-${kind.type}`}
                    onClick={() => props.onPick({ type: kind.type })}>{kind.type}</button>
            <span id={`palette-about-${kind.type}`} className="muted"><Prose text={kind.description} /></span>
          </li>
        ))}
      </ul>
      <h3 id="palette-registry">Registry blocks</h3>
      {blocks.length === 0 ? <p className="muted">{registry.length ? "None matches." : "The registry is empty."}</p> : (
        <ul aria-labelledby="palette-registry" className="palette-list">
          {blocks.map((block) => (
            <li key={block.id}>
              <button type="button" aria-describedby={`palette-about-r-${block.id}`}
                      onClick={() => props.onPick({ uses: block.id })}>{block.id}</button>
              <span id={`palette-about-r-${block.id}`} className="muted">
                {block.description ?? block.name ?? ""}</span>
            </li>
          ))}
        </ul>
      )}
      {props.schema && kinds.length === 0 && blocks.length === 0 &&
        <p role="status">No block type or registry block matches '{search}'.</p>}
    </div>
  );
}
