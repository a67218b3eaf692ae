-- Version 1 of PostgresStore's schema: threads, their checkpoints, their interrupts.
-- Released: never edit a statement here (see interlock.stores._postgres_schema).

-- threads --
CREATE TABLE threads (
    thread     TEXT PRIMARY KEY,
    head_id    TEXT NOT NULL,
    head_seq   BIGINT NOT NULL,
    status     TEXT NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
);

-- checkpoints --
CREATE TABLE checkpoints (
    thread     TEXT NOT NULL,
    seq        BIGINT NOT NULL,
    id         TEXT NOT NULL UNIQUE,
    parent_id  TEXT,
    step       BIGINT NOT NULL,
    base_seq   BIGINT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    source     TEXT NOT NULL,
    status     TEXT NOT NULL,
    body       BYTEA NOT NULL,
    PRIMARY KEY (thread, seq)
);

-- interrupts --
-- ord is the insertion order that breaks created_at ties in the inbox.
CREATE TABLE interrupts (
    id            TEXT PRIMARY KEY,
    ord           BIGSERIAL NOT NULL,
    thread        TEXT NOT NULL,
    checkpoint_id TEXT NOT NULL,
    key           TEXT,
    address       TEXT NOT NULL,
    kind          TEXT NOT NULL,
    status        TEXT NOT NULL,
    created_at    DOUBLE PRECISION NOT NULL,
    deadline      DOUBLE PRECISION,
    body          BYTEA NOT NULL,
    resolved_at   DOUBLE PRECISION,
    resolution    BYTEA
);

-- interrupts_pending --
-- The inbox across threads, and by key: partial, so they hold only pending interrupts.
CREATE INDEX interrupts_pending ON interrupts (created_at, ord) WHERE status = 'pending';

-- interrupts_pending_key --
CREATE INDEX interrupts_pending_key ON interrupts (key, created_at, ord)
    WHERE status = 'pending';

-- interrupts_thread --
-- Full, not partial: with status as an equality prefix it serves the per-thread inbox in
-- O(pending of the thread) and also lets delete_thread find resolved interrupts.
CREATE INDEX interrupts_thread ON interrupts (thread, status, created_at, ord);
