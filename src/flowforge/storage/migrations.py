"""Schema changes as ordered, named steps, one list per back end. A new
step is appended, never edited once released: databases in the field have
already applied the old ones."""

from __future__ import annotations

from flowforge.storage.base import Migration

__all__ = ["SQLITE_MIGRATIONS"]

SQLITE_MIGRATIONS: list[Migration] = [
    Migration("0001_runs_events_blocks_memory", (
        """CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            workflow_id TEXT NOT NULL,
            workflow_version INTEGER,
            user_id TEXT,
            status TEXT NOT NULL,
            inputs TEXT, outputs TEXT, usage TEXT, memory TEXT, error TEXT, document TEXT,
            created_at REAL NOT NULL, started_at REAL, finished_at REAL)""",
        "CREATE INDEX runs_by_workflow ON runs (workflow_id, created_at)",
        "CREATE INDEX runs_by_user ON runs (user_id, created_at)",
        "CREATE INDEX runs_by_status ON runs (status, created_at)",
        """CREATE TABLE run_events (
            run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            type TEXT NOT NULL,
            block_id TEXT,
            time REAL,
            data TEXT NOT NULL,
            PRIMARY KEY (run_id, seq))""",
        """CREATE TABLE run_blocks (
            run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
            scope TEXT NOT NULL DEFAULT '',
            block_id TEXT NOT NULL,
            type TEXT, status TEXT, inputs TEXT, output TEXT, error TEXT, reason TEXT,
            started_at REAL, finished_at REAL, duration_ms REAL,
            PRIMARY KEY (run_id, scope, block_id))""",
        """CREATE TABLE memory (
            user_id TEXT NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (user_id, key))""",
    )),
]
