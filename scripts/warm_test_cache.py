"""Write pytest's rewritten-assertion cache for every test module once, before
`make test` starts its workers.

Each pytest-xdist worker imports every test module to collect it, and pytest
rewrites the asserts of each (parse, transform, compile: ~7 s of CPU for
this suite) unless it finds the rewritten code cached in `__pycache__`.  With
PYTHONDONTWRITEBYTECODE set, as on CI machines, pytest never writes that
cache, so four workers paid it four times on every run.  pytest does read
a cache it did not write, so this writes it, on both cores, in ~4 s.

The cache entries are pytest's own (hash-checked: an edited test is simply
rewritten again by pytest).  They are made with pytest's private rewriting
functions, so a pytest that no longer has them is told and skipped: the
suite then runs as before, only slower.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"


def _warm(paths: list[Path]) -> int:
    from _pytest.assertion.rewrite import PYC_TAIL, _rewrite_test, _write_pyc_fp, get_cache_dir

    written = 0
    for path in paths:
        source_hash, code = _rewrite_test(path, None)     # no config: the default rewrite
        folder = get_cache_dir(path)
        folder.mkdir(exist_ok=True)
        target = folder / (path.name[:-3] + PYC_TAIL)
        partial = target.with_name(f"{target.name}.{os.getpid()}")
        with open(partial, "wb") as out:
            _write_pyc_fp(out, source_hash, code)
        os.replace(partial, target)                       # whole or absent, as pytest's own
        written += 1
    return written


def main() -> int:
    try:
        import _pytest.assertion.rewrite as rewrite
        for name in ("PYC_TAIL", "_rewrite_test", "_write_pyc_fp", "get_cache_dir"):
            getattr(rewrite, name)
    except (ImportError, AttributeError) as exc:
        print(f"warm_test_cache: skipped, this pytest differs ({exc})", file=sys.stderr)
        return 0
    paths = sorted(p for p in TESTS.rglob("*.py")
                   if p.name.startswith("test_") or p.name == "conftest.py")
    shares = [paths[i::2] for i in range(2)]
    with ProcessPoolExecutor(2) as pool:
        written = sum(pool.map(_warm, shares))
    print(f"warm_test_cache: {written} test modules rewritten once for every worker")
    return 0


if __name__ == "__main__":
    sys.exit(main())
