"""The document fuzzer, longer than the test suite runs it: mutations of the
shipped examples and generated documents through `flowforge.load`, counting
what is not a clean answer (a crash, or a load over 1 s).

    .venv/bin/python bench/fuzz_documents.py [--examples 3000] [--seed 1]

Prints one JSON line: documents tried, refused (WorkflowError), loaded,
crashes (unique, with where they happened), loads over 1 s, the slowest load.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hypothesis import HealthCheck, given, seed, settings  # noqa: E402

from tests.workflow.fuzzing import documents, example_mutations, load_any  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=3000, help="documents per generator")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    counts = {"tried": 0, "invalid": 0, "ok": 0, "slow": 0}
    crashes: dict[str, int] = {}
    slowest = 0.0

    def check(document) -> None:
        nonlocal slowest
        started = time.perf_counter()
        outcome = load_any(document)
        elapsed = time.perf_counter() - started
        slowest = max(slowest, elapsed)
        counts["tried"] += 1
        counts["slow"] += elapsed > 1.0
        if outcome in ("ok", "invalid"):
            counts[outcome] += 1
        else:
            crashes[outcome] = crashes.get(outcome, 0) + 1

    for strategy in (example_mutations(), documents()):
        test = settings(max_examples=args.examples, deadline=None, database=None,
                        suppress_health_check=list(HealthCheck))(
            seed(args.seed)(given(strategy)(check)))
        test()
    print(json.dumps({**counts, "crashes": sum(crashes.values()), "unique_crashes": crashes,
                      "slowest_load_s": round(slowest, 3)}, indent=None))


if __name__ == "__main__":
    main()
