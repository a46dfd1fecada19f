"""SQLite's WAL checkpoints, done by a thread instead of the event loop.

With SQLite's default, the commit that takes the write-ahead log past 1,000
pages copies them into the database file (and syncs it) before it returns:
inline, that stalls every run of the process for the length of the copy
(a third of what recording 500 concurrent runs cost the loop).  The loop's
connection leaves checkpoints to a thread with its own connection instead;
a checkpoint is one SQLite call, done without holding Python's GIL, so it
runs beside the loop on another core.  PASSIVE checkpoints never block the
writer.  The thread checkpoints after about `EVERY_ROWS` changed rows, and
every `PERIOD` seconds whatever else was written.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading

__all__ = ["Checkpointer", "EVERY_ROWS", "PERIOD"]

#: Rows changed after which the thread checkpoints (about SQLite's 1,000 pages).
EVERY_ROWS = 4000
#: Seconds after which it checkpoints anyway (writes that were not counted).
PERIOD = 5.0

log = logging.getLogger("flowforge.storage")


class Checkpointer:
    """Owns a connection and a thread; `wrote(db)` after each commit."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._due = threading.Event()
        self._stop = False
        self._counted = 0
        self._start()

    def _start(self) -> None:
        self._pid = os.getpid()
        self._thread = threading.Thread(target=self._run, name="flowforge-wal-checkpoint",
                                        daemon=True)
        self._thread.start()

    def wrote(self, db: sqlite3.Connection) -> None:
        """Called after a commit on the writing connection (cheap: a counter)."""
        if db.total_changes - self._counted >= EVERY_ROWS:
            self._counted = db.total_changes
            if self._pid != os.getpid():        # forked: the thread stayed behind
                self._start()
            self._due.set()

    def _run(self) -> None:
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            db.execute("PRAGMA busy_timeout=10000")
            while True:
                self._due.wait(PERIOD)
                self._due.clear()
                if self._stop:
                    return
                try:
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                except sqlite3.Error as exc:     # a locked or vanished file: next time
                    log.debug("WAL checkpoint of %s: %s", self.path, exc)
        finally:
            db.close()

    def close(self) -> None:
        self._stop = True
        self._due.set()
        self._thread.join(timeout=30)
