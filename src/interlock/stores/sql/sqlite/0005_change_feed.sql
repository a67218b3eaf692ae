-- Version 5 of SqliteStore's schema: the change feed (`Store.changes`).
-- Released: never edit a statement here (see interlock.stores._sqlite_schema).

-- changes --
-- A row per change an append makes, written in its transaction. Appends hold the write lock,
-- so seq goes up in commit order and a reader that has seen seq n has seen every change
-- before it. AUTOINCREMENT: a seq is never used twice, even after pruning removed the newest
-- rows (a follower's cursor names the last one it saw). The feed starts empty in a file
-- written before this version.
CREATE TABLE changes (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    at            REAL NOT NULL,
    kind          TEXT NOT NULL,
    thread        TEXT NOT NULL,
    checkpoint_id TEXT NOT NULL,
    interrupt_id  TEXT,
    actor         TEXT,
    digest        BLOB NOT NULL
);
