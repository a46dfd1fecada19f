"""Whether a process still runs, for code that watches processes it did not
start (a PostgreSQL server after `pg_ctl start`, a lease's holder).

`os.kill(pid, 0)` alone says yes for a zombie: a process that has exited
but whose parent has not collected it yet.  A process whose parent is busy,
or an init that reaps every second or two (as in containers), keeps a dead
process looking alive for that long: here a stopped PostgreSQL looked alive
for 1-2 s after it had exited in 40 ms, and a lease's holder killed with -9
looked alive until its parent collected it.  Like errors.py, below every
layer.

Also here: what a process flowforge itself runs (a pool worker, `flowforge
serve`) does to its own heap once it has started (`settle_heap`)."""

from __future__ import annotations

import gc
import os

__all__ = ["YOUNG_COLLECTION_EVERY", "settle_heap", "process_exists"]

#: In flowforge's own processes, the young generation is collected after this
#: many new container objects, not Python's 700.  Beside 500 concurrent traced
#: runs (bench/engine.py's S4), the OpenTelemetry SDK leaves ~11 containers per
#: span waiting in its exporter's queue, and each young collection walked them
#: all again: traced rounds took 153 ms of CPU at 700, 135 at 10,000, 133 at
#: 20,000, 130 at 50,000 (interleaved, bench/RESULTS.md); untraced ones ~60
#: at each.  The cost: cyclic garbage waits up to that many allocations (at
#: ~200 bytes an object, a few MB) before it is freed.
YOUNG_COLLECTION_EVERY = 20_000


def settle_heap() -> None:
    """Collect once, keep what start-up left out of the collector's generations
    (`gc.freeze`), then collect the young generation less often
    (`YOUNG_COLLECTION_EVERY`).

    The imports leave ~100,000 objects that live as long as the process, and
    every full collection walked them all again: 15-30 ms each here, and runs
    bring full collections on (what a run keeps alive for its length, and a
    traced run's ended spans waiting in the exporter's queue, outlive the
    young generations).  Frozen, they are never walked again; what is
    allocated later is collected as before.  Called by the processes
    flowforge runs, after their start-up; never on `import flowforge`: a
    program that embeds flowforge decides for its own heap."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_EVERY, middle, old)


def process_exists(pid: int) -> bool:
    """Whether `pid` names a process that has not exited (a zombie has)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass                                   # another user's: it exists
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # "pid (command) state ...": the command may hold spaces and parentheses
            return stat.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        return True                            # no /proc (not Linux): kill(0) said so
