-- Version 3 of SqliteStore's schema: leases, the tool an interrupt gates, side effects and
-- the audit log.
-- Released: never edit a statement here (see interlock.stores._sqlite_schema).

-- add_lease_owner --
-- The lease: who runs the thread now and until when; the fencing token only grows.
ALTER TABLE threads ADD COLUMN lease_owner TEXT;

-- add_lease_token --
ALTER TABLE threads ADD COLUMN lease_token INTEGER NOT NULL DEFAULT 0;

-- add_lease_expires --
ALTER TABLE threads ADD COLUMN lease_expires REAL NOT NULL DEFAULT 0;

-- add_interrupt_tool --
-- The tool an interrupt gates, for the inbox filter.
ALTER TABLE interrupts ADD COLUMN tool TEXT;

-- interrupts_pending_tool --
CREATE INDEX interrupts_pending_tool ON interrupts (tool, created_at) WHERE status = 'pending';

-- effects --
-- Side effects: started before the call, done after it.
CREATE TABLE effects (
    thread      TEXT NOT NULL,
    key         TEXT NOT NULL,
    name        TEXT NOT NULL,
    status      TEXT NOT NULL,
    attempt     INTEGER NOT NULL,
    started_at  REAL NOT NULL,
    finished_at REAL,
    result      BLOB,
    PRIMARY KEY (thread, key)
);

-- audit --
-- The audit log: one hash chain per thread, never updated or deleted by the store.
CREATE TABLE audit (
    thread TEXT NOT NULL,
    seq    INTEGER NOT NULL,
    at     REAL NOT NULL,
    kind   TEXT NOT NULL,
    actor  TEXT,
    data   BLOB NOT NULL,
    prev   BLOB NOT NULL,
    hash   BLOB NOT NULL,
    PRIMARY KEY (thread, seq)
);
