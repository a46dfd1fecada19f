"""The web app's build is committed inside the package (users need no
Node.js): it must be the build of the sources in web/.  `make ui` records a
hash of the sources in `build-stamp.json`; git keeps no mtimes, so the hash,
not file times, tells whether web/src changed since the last build."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "web"
STATIC = ROOT / "src" / "flowforge" / "server" / "static"
#: what web/scripts/stamp.mjs hashes, in the same way
INPUTS = ("index.html", "package.json", "package-lock.json", "tsconfig.json", "vite.config.ts",
          "src")


def sources_hash() -> str:
    files: list[str] = []
    for name in INPUTS:
        path = WEB / name
        if path.is_dir():
            files += [p.relative_to(WEB).as_posix() for p in path.rglob("*") if p.is_file()]
        else:
            files.append(name)
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0")
        digest.update((WEB / name).read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def test_the_committed_build_is_the_build_of_web_src():
    stamp = json.loads((STATIC / "build-stamp.json").read_text())
    assert stamp["sources_sha256"] == sources_hash(), (
        "web/ changed since the committed build in src/flowforge/server/static: run `make ui` "
        "and commit the result")


def test_the_build_is_whole_and_fetches_nothing_from_elsewhere():
    index = (STATIC / "index.html").read_text()
    assets = sorted(p.name for p in (STATIC / "assets").iterdir())
    served = [name for name in assets if not name.endswith((".br", ".gz"))]
    # every file is reached from index.html, directly or through the chunks it
    # loads (each page is a chunk of its own, imported when first shown)
    texts = {name: (STATIC / "assets" / name).read_text(errors="replace")
             for name in served if name.endswith((".js", ".css"))}
    reached, todo = set(), [index]
    while todo:
        text = todo.pop()
        for name in served:
            if name not in reached and name in text:
                reached.add(name)
                todo.append(texts.get(name, ""))
    assert set(served) - reached == set(), "assets no page loads"
    assert "http://" not in index and "https://" not in index     # no CDN
    assert any(name.endswith(".js") for name in assets)


def test_every_large_asset_is_precompressed_and_the_copies_match():
    import gzip
    import subprocess

    assets = STATIC / "assets"
    # brotli with Node's zlib, which made the copies (Python has no brotli here)
    unbrotli = ("const z = require('zlib'), f = require('fs');"
                "process.stdout.write(z.brotliDecompressSync(f.readFileSync(process.argv[1])))")
    for path in assets.iterdir():
        if path.suffix in (".js", ".css"):
            data = path.read_bytes()
            assert gzip.decompress((assets / f"{path.name}.gz").read_bytes()) == data, path.name
            unpacked = subprocess.run(["node", "-e", unbrotli, str(assets / f"{path.name}.br")],
                                      capture_output=True, check=True).stdout
            assert unpacked == data, path.name
    total = sum(p.stat().st_size for p in assets.glob("*.js"))
    packed = sum(p.stat().st_size for p in assets.glob("*.js.br"))
    assert packed < total / 3, (packed, total)
