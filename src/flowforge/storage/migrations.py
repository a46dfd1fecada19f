"""Schema changes as ordered, named steps, one list per back end. A new
step is appended, never edited once released: databases in the field have
already applied the old ones."""

from __future__ import annotations

from flowforge.storage.access import ACCESS_TABLES
from flowforge.storage.chat_sessions import CHAT_TABLES
from flowforge.storage.base import Migration
from flowforge.storage.pipelines import PIPELINE_TABLES
from flowforge.storage.schedules import SCHEDULE_TABLES

__all__ = ["SQLITE_MIGRATIONS", "POSTGRES_MIGRATIONS"]

#: A submitted run's `Idempotency-Key`, unique per user (partial: most runs
#: have none), and the fingerprint of the request that carried it.  The same
#: statements on both back ends.
_IDEMPOTENCY = (
    "ALTER TABLE runs ADD COLUMN idempotency_key TEXT",
    "ALTER TABLE runs ADD COLUMN request_fingerprint TEXT",
    "CREATE UNIQUE INDEX runs_by_idempotency_key ON runs (user_id, idempotency_key) "
    "WHERE idempotency_key IS NOT NULL",
)

#: The text a workflow version was saved from, as the author wrote it (YAML or
#: JSON): the document column is the parsed, validated form the engine runs.
#: NULL for versions saved before this step or without text.
_SOURCE_TEXT = ("ALTER TABLE workflow_versions ADD COLUMN source TEXT",)

#: How many times a run was resumed after its process died while it was
#: `running` (NULL: never): past a limit it is failed instead of resumed again
#: (`service.resuming`), so a run that kills its process is not retried forever.
_CUT_OFF_RESUMES = ("ALTER TABLE runs ADD COLUMN cut_off_resumes INTEGER",)

#: PostgreSQL: a run's write fenced by its lease (`grouping.fence_rows`) checks
#: the lease in the same transaction, in the same round trip as the write: a
#: lease that is not the writer's raises SQLSTATE FF001 (`LeaseLost`), one with
#: less than half its time left is extended.  Only those rows are locked and
#: re-checked (the UPDATE waits for a concurrent claim and sees its outcome): a
#: lease with half its time left cannot be claimed before this transaction
#: ends, unless it lasts half a lease; locking every row cost ~40% of a group's
#: time.  Rows: a JSON array of [run_id, owner, until, refresh_below].
_FENCE = """CREATE FUNCTION flowforge_fence(fenced jsonb) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    lost text;
BEGIN
    WITH odd AS (
        SELECT f->>0 AS run_id, f->>1 AS owner, (f->>2)::float8 AS until
        FROM jsonb_array_elements(fenced) f JOIN runs ON runs.run_id = f->>0
        WHERE runs.lease_owner IS DISTINCT FROM f->>1 OR runs.lease_expires_at IS NULL
            OR runs.lease_expires_at < (f->>3)::float8),
    extended AS (
        UPDATE runs SET lease_expires_at = odd.until FROM odd
        WHERE runs.run_id = odd.run_id AND runs.lease_owner = odd.owner
        RETURNING runs.run_id)
    SELECT string_agg(odd.run_id, ', ') INTO lost FROM odd
        WHERE odd.run_id NOT IN (SELECT run_id FROM extended);
    IF lost IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'FF001', MESSAGE = 'lease lost: ' || lost;
    END IF;
END
$$"""

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
    Migration("0002_workflows_users_keys_webhooks", (
        "ALTER TABLE runs ADD COLUMN webhook TEXT",
        """CREATE TABLE workflows (
            owner TEXT NOT NULL,
            workflow_id TEXT NOT NULL,
            latest_version INTEGER NOT NULL,
            name TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            deleted_at REAL,
            PRIMARY KEY (owner, workflow_id))""",
        """CREATE TABLE workflow_versions (
            owner TEXT NOT NULL,
            workflow_id TEXT NOT NULL,
            version INTEGER NOT NULL,
            name TEXT,
            document TEXT NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (owner, workflow_id, version))""",
        """CREATE TABLE users (
            user_id TEXT PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            role TEXT NOT NULL DEFAULT 'user',
            webhook_secret TEXT NOT NULL,
            created_at REAL NOT NULL)""",
        """CREATE TABLE api_keys (
            key_id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL REFERENCES users (user_id) ON DELETE CASCADE,
            key_hash TEXT NOT NULL UNIQUE,
            prefix TEXT,
            created_at REAL NOT NULL,
            revoked_at REAL)""",
        """CREATE TABLE webhook_deliveries (
            run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
            attempt INTEGER NOT NULL,
            url TEXT NOT NULL,
            status_code INTEGER,
            error TEXT,
            succeeded INTEGER NOT NULL,
            duration_ms REAL,
            created_at REAL NOT NULL,
            PRIMARY KEY (run_id, attempt))""",
    )),
    Migration("0003_run_cancel_requests", (
        "ALTER TABLE runs ADD COLUMN cancel_requested_at REAL",
    )),    Migration("0005_user_secrets_and_capability_grants", ACCESS_TABLES),
    Migration("0007_run_trace_id", ("ALTER TABLE runs ADD COLUMN trace_id TEXT",)),
    Migration("0008_run_lease", ("ALTER TABLE runs ADD COLUMN lease_owner TEXT",
                                 "ALTER TABLE runs ADD COLUMN lease_expires_at REAL")),
    Migration("0009_pipelines", PIPELINE_TABLES),
    Migration("0010_chat_sessions", CHAT_TABLES),
    Migration("0011_run_resume_at_budget", ("ALTER TABLE runs ADD COLUMN resume_at REAL",
                                            "ALTER TABLE runs ADD COLUMN budget TEXT",
                                            "CREATE INDEX runs_by_resume_at ON runs "
                                            "(status, resume_at)")),
    Migration("0012_schedule_firings", SCHEDULE_TABLES),
    Migration("0013_run_webhook_state", ("ALTER TABLE runs ADD COLUMN webhook_state TEXT",
                                         "ALTER TABLE runs ADD COLUMN webhook_lease_until REAL",
                                         "CREATE INDEX runs_by_webhook_state ON runs "
                                         "(webhook_state)")),
    Migration("0014_run_idempotency_key", _IDEMPOTENCY),
    Migration("0015_workflow_source_text", _SOURCE_TEXT),
    # a run's fenced writes read its lease from this index, not from the row,
    # which holds the document first (a long one spills to overflow pages)
    Migration("0016_lease_fence", ("CREATE INDEX runs_by_lease ON runs "
                                   "(run_id, lease_owner, lease_expires_at)",)),
    Migration("0017_run_cut_off_resumes", _CUT_OFF_RESUMES),
]

#: PostgreSQL keeps JSON as TEXT, like SQLite: `jsonb` would reorder the keys
#: of outputs users read, and reject strings holding NUL.  `position` columns
#: give rows the insertion order SQLite's rowid gives.
POSTGRES_MIGRATIONS: list[Migration] = [
    Migration("0001_runs_events_blocks_memory", (
        """CREATE TABLE runs (
            position BIGSERIAL,
            run_id TEXT PRIMARY KEY,
            workflow_id TEXT NOT NULL,
            workflow_version INTEGER,
            user_id TEXT,
            status TEXT NOT NULL,
            inputs TEXT, outputs TEXT, usage TEXT, memory TEXT, error TEXT, document TEXT,
            created_at DOUBLE PRECISION NOT NULL, started_at DOUBLE PRECISION,
            finished_at DOUBLE PRECISION)""",
        "CREATE INDEX runs_by_workflow ON runs (workflow_id, created_at)",
        "CREATE INDEX runs_by_user ON runs (user_id, created_at)",
        "CREATE INDEX runs_by_status ON runs (status, created_at)",
        """CREATE TABLE run_events (
            run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            type TEXT NOT NULL,
            block_id TEXT,
            time DOUBLE PRECISION,
            data TEXT NOT NULL,
            PRIMARY KEY (run_id, seq))""",
        """CREATE TABLE run_blocks (
            position BIGSERIAL,
            run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
            scope TEXT NOT NULL DEFAULT '',
            block_id TEXT NOT NULL,
            type TEXT, status TEXT, inputs TEXT, output TEXT, error TEXT, reason TEXT,
            started_at DOUBLE PRECISION, finished_at DOUBLE PRECISION,
            duration_ms DOUBLE PRECISION,
            PRIMARY KEY (run_id, scope, block_id))""",
        """CREATE TABLE memory (
            user_id TEXT NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (user_id, key))""",
    )),
    Migration("0002_workflows_users_keys_webhooks", (
        "ALTER TABLE runs ADD COLUMN webhook TEXT",
        """CREATE TABLE workflows (
            owner TEXT NOT NULL,
            workflow_id TEXT NOT NULL,
            latest_version INTEGER NOT NULL,
            name TEXT,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            deleted_at DOUBLE PRECISION,
            PRIMARY KEY (owner, workflow_id))""",
        """CREATE TABLE workflow_versions (
            owner TEXT NOT NULL,
            workflow_id TEXT NOT NULL,
            version INTEGER NOT NULL,
            name TEXT,
            document TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (owner, workflow_id, version))""",
        """CREATE TABLE users (
            user_id TEXT PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            role TEXT NOT NULL DEFAULT 'user',
            webhook_secret TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL)""",
        """CREATE TABLE api_keys (
            key_id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL REFERENCES users (user_id) ON DELETE CASCADE,
            key_hash TEXT NOT NULL UNIQUE,
            prefix TEXT,
            created_at DOUBLE PRECISION NOT NULL,
            revoked_at DOUBLE PRECISION)""",
        """CREATE TABLE webhook_deliveries (
            run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
            attempt INTEGER NOT NULL,
            url TEXT NOT NULL,
            status_code INTEGER,
            error TEXT,
            succeeded BOOLEAN NOT NULL,
            duration_ms DOUBLE PRECISION,
            created_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (run_id, attempt))""",
    )),
    Migration("0003_run_cancel_requests", (
        "ALTER TABLE runs ADD COLUMN cancel_requested_at DOUBLE PRECISION",
    )),    Migration("0005_user_secrets_and_capability_grants", ACCESS_TABLES),
    Migration("0007_run_trace_id", ("ALTER TABLE runs ADD COLUMN trace_id TEXT",)),
    Migration("0008_run_lease", ("ALTER TABLE runs ADD COLUMN lease_owner TEXT",
                                 "ALTER TABLE runs ADD COLUMN lease_expires_at "
                                 "DOUBLE PRECISION")),
    Migration("0009_pipelines", PIPELINE_TABLES),
    Migration("0010_chat_sessions", CHAT_TABLES),
    Migration("0011_run_resume_at_budget", ("ALTER TABLE runs ADD COLUMN resume_at "
                                            "DOUBLE PRECISION",
                                            "ALTER TABLE runs ADD COLUMN budget TEXT",
                                            "CREATE INDEX runs_by_resume_at ON runs "
                                            "(status, resume_at)")),
    Migration("0012_schedule_firings", SCHEDULE_TABLES),
    Migration("0013_run_webhook_state", ("ALTER TABLE runs ADD COLUMN webhook_state TEXT",
                                         "ALTER TABLE runs ADD COLUMN webhook_lease_until "
                                         "DOUBLE PRECISION",
                                         "CREATE INDEX runs_by_webhook_state ON runs "
                                         "(webhook_state)")),
    Migration("0014_run_idempotency_key", _IDEMPOTENCY),
    Migration("0015_workflow_source_text", _SOURCE_TEXT),
    Migration("0016_lease_fence", (_FENCE,)),
    Migration("0017_run_cut_off_resumes", _CUT_OFF_RESUMES),
]
