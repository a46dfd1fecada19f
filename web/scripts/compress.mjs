// Writes a brotli (.br) and a gzip (.gz) copy beside each text asset in
// dist/assets, at the highest levels: compressed once at build time, so the
// server sends them as they are (server/webui.py answers Accept-Encoding).
import { brotliCompressSync, gzipSync, constants } from "node:zlib";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const assets = new URL("../dist/assets/", import.meta.url).pathname;
const TEXT = /\.(js|css|svg|json|map|txt)$/;
let before = 0;
let after = 0;
for (const name of readdirSync(assets).filter((n) => TEXT.test(n))) {
  const data = readFileSync(join(assets, name));
  const br = brotliCompressSync(data, { params: {
    [constants.BROTLI_PARAM_QUALITY]: constants.BROTLI_MAX_QUALITY,
    [constants.BROTLI_PARAM_SIZE_HINT]: data.length } });
  writeFileSync(join(assets, `${name}.br`), br);
  writeFileSync(join(assets, `${name}.gz`), gzipSync(data, { level: 9 }));
  before += data.length;
  after += br.length;
}
console.log(`compressed: ${(before / 1024).toFixed(0)} KB of assets, ${(after / 1024).toFixed(0)} KB as brotli`);
