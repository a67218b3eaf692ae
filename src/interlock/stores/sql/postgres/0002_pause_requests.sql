-- Version 2 of PostgresStore's schema: external pause requests.
-- Released: never edit a statement here (see interlock.stores._postgres_schema).

-- pause_requests --
CREATE TABLE pause_requests (
    thread       TEXT PRIMARY KEY,
    kind         TEXT NOT NULL,
    requested_at DOUBLE PRECISION NOT NULL
);
