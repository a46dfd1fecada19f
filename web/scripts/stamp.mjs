// Records a hash of the sources in dist/build-stamp.json, so a test can tell
// when the committed build is older than web/src (git keeps no mtimes).
// The same hash is computed by tests/webapp/test_build_fresh.py.
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, writeFileSync, statSync } from "node:fs";
import { join, sep } from "node:path";

const root = new URL("..", import.meta.url).pathname;
const inputs = ["index.html", "package.json", "package-lock.json", "tsconfig.json",
                "vite.config.ts", "src"];

function files(path) {
  const full = join(root, path);
  if (!statSync(full).isDirectory()) return [path];
  return readdirSync(full).flatMap((name) => files(join(path, name)));
}

const all = inputs.flatMap(files).map((p) => p.split(sep).join("/")).sort();
const hash = createHash("sha256");
for (const path of all) {
  hash.update(path + "\0");
  hash.update(readFileSync(join(root, path)));
  hash.update("\0");
}
const stamp = { sources_sha256: hash.digest("hex"), files: all.length };
writeFileSync(join(root, "dist", "build-stamp.json"), JSON.stringify(stamp, null, 2) + "\n");
console.log(`build-stamp: ${stamp.sources_sha256} (${stamp.files} files)`);
