"""The API fuzzer, longer than the test suite runs it: schemathesis against a
fresh `flowforge serve` with more examples per operation.

    .venv/bin/python bench/fuzz_server.py [--examples 50] [--seed 1]

Prints schemathesis' summary (requests generated, failures) and exits with its
code (0: no 5xx, no undocumented status code)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.server.test_schemathesis import schemathesis, serve, stop  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=50, help="examples per operation")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        process, url, key, _ = serve(Path(folder))
        try:
            result = schemathesis(url, key, args.examples, args.seed, timeout=3600,
                                  cwd=Path(folder))
        finally:
            stop(process)
    lines = result.stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if "SUMMARY" in line), max(0, len(lines) - 30))
    print("\n".join(lines[start:]))
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
