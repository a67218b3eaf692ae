-- Version 3 of PostgresStore's schema: leases, the tool an interrupt gates, side effects and
-- the audit log.
-- Released: never edit a statement here (see interlock.stores._postgres_schema).

-- add_lease_owner --
-- The lease: who runs the thread now and until when; the fencing token only grows.
ALTER TABLE threads ADD COLUMN lease_owner TEXT;

-- add_lease_token --
ALTER TABLE threads ADD COLUMN lease_token BIGINT NOT NULL DEFAULT 0;

-- add_lease_expires --
ALTER TABLE threads ADD COLUMN lease_expires DOUBLE PRECISION NOT NULL DEFAULT 0;

-- add_interrupt_tool --
ALTER TABLE interrupts ADD COLUMN tool TEXT;

-- interrupts_pending_tool --
CREATE INDEX interrupts_pending_tool ON interrupts (tool, created_at, ord)
    WHERE status = 'pending';

-- effects --
CREATE TABLE effects (
    thread      TEXT NOT NULL,
    key         TEXT NOT NULL,
    name        TEXT NOT NULL,
    status      TEXT NOT NULL,
    attempt     BIGINT NOT NULL,
    started_at  DOUBLE PRECISION NOT NULL,
    finished_at DOUBLE PRECISION,
    result      BYTEA,
    PRIMARY KEY (thread, key)
);

-- audit --
CREATE TABLE audit (
    thread TEXT NOT NULL,
    seq    BIGINT NOT NULL,
    at     DOUBLE PRECISION NOT NULL,
    kind   TEXT NOT NULL,
    actor  TEXT,
    data   BYTEA NOT NULL,
    prev   BYTEA NOT NULL,
    hash   BYTEA NOT NULL,
    PRIMARY KEY (thread, seq)
);
