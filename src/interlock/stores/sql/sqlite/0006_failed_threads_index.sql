-- Version 6 of SqliteStore's schema: an index of the failed threads.
-- Released: never edit a statement here (see interlock.stores._sqlite_schema).

-- threads_failed --
-- `Store.threads(status="failed")`: the threads whose continuation could not run, or whose
-- node raised, each waiting for a fix and a resume. Few, so an index of their own.
CREATE INDEX threads_failed ON threads (thread) WHERE status = 'failed';
