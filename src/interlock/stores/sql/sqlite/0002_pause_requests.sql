-- Version 2 of SqliteStore's schema: external pause requests.
-- Released: never edit a statement here (see interlock.stores._sqlite_schema).

-- pause_requests --
-- A request, from any process, that whoever runs the thread pauses it; the executor takes
-- (deletes) it when it sees it.
CREATE TABLE pause_requests (
    thread       TEXT PRIMARY KEY,
    kind         TEXT NOT NULL,
    requested_at REAL NOT NULL
) WITHOUT ROWID;
