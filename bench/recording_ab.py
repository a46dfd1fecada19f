"""The gate's wake-ups, A/B in one process (issue 46): recorded S4 in SQLite with
a group writer's futures as plain `loop.create_future()` ones (the recorder then
waits through `asyncio.shield`, and a recorded run reads its value limits from
the environment, as before 6c3ae8b) against today's `WriteFuture`, round by
round, order alternated, beside S4 in memory.

    .venv/bin/python bench/recording_ab.py 16 [count]

Prints the loop thread's CPU per round (median), the median of the paired
differences, and with `count` the loop callbacks (`asyncio.Handle`s) per round:
a figure the machine's load does not move.
"""

from __future__ import annotations

import asyncio
import asyncio.events as loop_events
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))
sys.path.insert(0, os.path.dirname(__file__))

from engine import Flowforge  # noqa: E402

from flowforge.engine import limits  # noqa: E402
from flowforge.storage import sqlite_writes, storage_from_url  # noqa: E402

NEW_JOIN = sqlite_writes.GroupWriter.join
NEW_OF = limits.ValueLimits.__dict__["of"]


def old_join(self, write):
    loop = asyncio.get_running_loop()
    write.future = loop.create_future()
    self._batch.append(write)
    if len(self._batch) == 1:
        loop.call_soon(self._flush)
    return write.future


@classmethod
def old_of(cls, services=None):
    if not services:
        if not limits._PROCESS:
            limits._PROCESS.append(cls._made(None))
        return limits._PROCESS[0]
    return cls._made(services)


def use(new: bool) -> None:
    sqlite_writes.GroupWriter.join = NEW_JOIN if new else old_join
    limits.ValueLimits.of = NEW_OF if new else old_of


COUNT = [0]
_HANDLE_INIT = loop_events.Handle.__init__


def _counting_init(self, *args, **kwargs):
    COUNT[0] += 1
    _HANDLE_INIT(self, *args, **kwargs)


async def main(rounds: int, counting: bool) -> None:
    engine = Flowforge()
    storage = storage_from_url(f"sqlite:///{tempfile.mkdtemp(prefix='ff-ab-')}/b.db")
    await storage.open()
    for new in (False, True):
        use(new)
        await engine.s4(storage)
    await engine.s4(False)
    cpu: dict[str, list[float]] = {"memory": [], "old": [], "new": []}
    handles: dict[str, list[int]] = {"memory": [], "old": [], "new": []}
    order = [("memory", False, None), ("old", storage, False), ("new", storage, True)]
    for index in range(rounds):
        for name, target, new in (order if index % 2 == 0 else [order[0], order[2], order[1]]):
            if new is not None:
                use(new)
            if counting:
                loop_events.Handle.__init__ = _counting_init
            COUNT[0] = 0
            start = time.thread_time()
            await engine.s4(target)
            cpu[name].append((time.thread_time() - start) * 1000)
            loop_events.Handle.__init__ = _HANDLE_INIT
            handles[name].append(COUNT[0])
    use(True)
    await storage.close()
    diffs = [old - new for old, new in zip(cpu["old"], cpu["new"])]
    out = {"rounds": rounds,
           **{f"loop_cpu_ms_{k}": round(statistics.median(v), 1) for k, v in cpu.items()},
           "old_minus_new_ms_median": round(statistics.median(diffs), 1),
           "old_minus_new_ms_quartiles": [round(x, 1) for x in statistics.quantiles(diffs, n=4)]}
    if counting:
        out.update({f"loop_callbacks_{k}": statistics.median(v) for k, v in handles.items()})
    out["load"] = os.getloadavg()
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 16, "count" in sys.argv))
