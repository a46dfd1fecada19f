"""A process that exited is gone, even before its parent collected it: a
stopped PostgreSQL is waited for 40 ms, not until init reaps it, and a run's
lease held by a killed process is free at once."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from flowforge.processes import process_exists
from flowforge.service.cancel import PROCESS, host_name, lease_holder_alive


def _zombie() -> subprocess.Popen:
    """A child that has exited and that nobody has collected yet."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while open(f"/proc/{child.pid}/stat").read().rpartition(")")[2].split()[0] != "Z":
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.01)
    return child


def test_an_exited_process_is_gone_before_it_is_collected():
    child = _zombie()
    try:
        os.kill(child.pid, 0)                       # the kernel still answers for it ...
        assert process_exists(child.pid) is False   # ... but it runs no more
    finally:
        child.wait()
    assert process_exists(child.pid) is False
    assert process_exists(os.getpid()) is True
    assert process_exists(1) is True                # another user's or init: it exists


def test_a_lease_held_by_a_process_that_exited_is_not_held():
    child = _zombie()
    try:
        assert lease_holder_alive(f"{host_name()}:{child.pid}:x") is False
    finally:
        child.wait()
    assert lease_holder_alive(PROCESS) is True
    assert lease_holder_alive(f"another-host:{os.getpid()}:x") is None


_FROZEN = '''
import gc, json, weakref
import flowforge
from flowforge.processes import YOUNG_COLLECTION_EVERY, settle_heap

class Node:
    pass

before = len(gc.get_objects())
settle_heap()
young = gc.get_threshold()[0] == YOUNG_COLLECTION_EVERY > 700
frozen = gc.get_freeze_count()
walked = len(gc.get_objects())              # what a full collection still walks
cycle = Node(); cycle.me = cycle            # garbage made after start-up ...
alive = weakref.ref(cycle)
del cycle
gc.collect()
print(json.dumps({"before": before, "frozen": frozen, "walked": walked,
                  "collected": alive() is None, "young": young}))
'''


def test_a_settled_heap_is_not_walked_and_later_garbage_is_still_collected():
    """What `flowforge serve` and the pool's workers do once started: the
    imports' objects leave the collector's generations, later cycles do not,
    and the young generation is collected less often than Python's default."""
    import json

    ran = subprocess.run([sys.executable, "-c", _FROZEN], capture_output=True, text=True,
                         timeout=120)
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout)
    assert seen["frozen"] >= 0.9 * seen["before"] > 10_000, seen   # `import flowforge`'s
    assert seen["walked"] < 0.01 * seen["frozen"], seen
    assert seen["collected"] is True and seen["young"] is True, seen
