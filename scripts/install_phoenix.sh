#!/usr/bin/env bash
# Arize Phoenix, a real OTLP trace receiver with a query API, for the tracing
# end-to-end test (tests/tracing/test_phoenix.py). It lives in its own virtual
# environment: its pins (older anthropic and google-genai SDKs) must not touch
# flowforge's. Idempotent: does nothing when the pinned version is there.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VERSION=20.26.1
VENV=.venv-phoenix
if [ -x "$VENV/bin/phoenix" ] && "$VENV/bin/pip" show arize-phoenix 2>/dev/null | grep -q "^Version: $VERSION$"; then
  exit 0
fi
test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check "arize-phoenix==$VERSION"
