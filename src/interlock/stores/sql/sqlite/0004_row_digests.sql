-- Version 4 of SqliteStore's schema: digests of each row's columns (see
-- interlock.stores._rows), checked on every read: a damaged file fails a read rather than
-- answering it with another row. Rows written before get theirs now, from the values they
-- hold; interlock_digest is the Python function the migration registers on its connection.
-- Released: never edit a statement here (see interlock.stores._sqlite_schema).

-- add_thread_digest --
ALTER TABLE threads ADD COLUMN digest BLOB;

-- add_lease_digest --
ALTER TABLE threads ADD COLUMN lease_digest BLOB;

-- add_checkpoint_digest --
ALTER TABLE checkpoints ADD COLUMN digest BLOB;

-- add_interrupt_digest --
ALTER TABLE interrupts ADD COLUMN digest BLOB;

-- digest_threads --
UPDATE threads SET
    digest = interlock_digest(thread, head_id, head_seq, status, updated_at),
    lease_digest = interlock_digest(thread, lease_owner, lease_token, lease_expires);

-- digest_checkpoints --
UPDATE checkpoints SET digest = interlock_digest(thread, seq, id, parent_id, step, base_seq,
    created_at, source, status, body);

-- digest_interrupts --
UPDATE interrupts SET digest = interlock_digest(id, thread, checkpoint_id, key, address, kind,
    status, created_at, deadline, body, resolved_at, resolution, tool);
