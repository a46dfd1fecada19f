// The app is served by `flowforge serve` at `/`; `make ui` copies dist/ into
// src/flowforge/server/static/. No React plugin: esbuild compiles the JSX.
import { defineConfig } from "vite";

export default defineConfig({
  esbuild: { jsx: "automatic" },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    chunkSizeWarningLimit: 2000,
    sourcemap: false,
  },
  server: { proxy: { "/api": "http://127.0.0.1:8000" } },
});
