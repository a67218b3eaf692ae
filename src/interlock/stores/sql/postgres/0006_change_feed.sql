-- Version 6 of PostgresStore's schema: the change feed (`Store.changes`).
-- Released: never edit a statement here (see interlock.stores._postgres_schema).

-- changes --
-- A sequence is not commit-ordered here: a transaction that took seq 5 may commit after the
-- one that took seq 6 is visible, and a follower that had moved past 6 would never see 5. So
-- each row also records the id of the transaction that wrote it, and the feed only ever
-- returns rows of transactions older than the oldest one still running (pg_snapshot_xmin):
-- those are all finished, so that part of the feed never changes again, and it only grows at
-- its end. Ordered by (txid, seq), with the cursor naming both. Invariant: txid order is
-- commit order for the changes of one thread (an append that follows another names that
-- one's checkpoint as its expected head, so it began, and got its id, after that one
-- committed). A transaction left open delays the feed until it ends; none is lost.
-- The feed starts empty in a database migrated from an earlier version.
CREATE TABLE changes (
    txid          XID8 NOT NULL DEFAULT pg_current_xact_id(),
    seq           BIGSERIAL NOT NULL,
    at            DOUBLE PRECISION NOT NULL,
    kind          TEXT NOT NULL,
    thread        TEXT NOT NULL,
    checkpoint_id TEXT NOT NULL,
    interrupt_id  TEXT,
    actor         TEXT,
    digest        BYTEA NOT NULL,
    PRIMARY KEY (txid, seq)
);

-- interlock_change --
-- One change row, with the digest `_rows.change_rows` computes: msgspec's msgpack encoding
-- of its six columns, as interlock_field writes it, but inline (PL/pgSQL keeps its plans for
-- the session, where each call of those SQL functions is planned anew and costs more than
-- the whole row).
CREATE FUNCTION interlock_change(p_at DOUBLE PRECISION, p_kind TEXT, p_thread TEXT,
    p_checkpoint_id TEXT, p_interrupt_id TEXT) RETURNS VOID LANGUAGE plpgsql AS $fn$
DECLARE
    v_fields BYTEA := '\xcb'::BYTEA || float8send(p_at);
    v_text TEXT;
    v_n INTEGER;
BEGIN
    FOREACH v_text IN ARRAY ARRAY[p_kind, p_thread, p_checkpoint_id, p_interrupt_id] LOOP
        v_n := octet_length(v_text);
        v_fields := v_fields || CASE
            WHEN v_text IS NULL THEN '\xc0'::BYTEA
            WHEN v_n < 32 THEN set_byte('\x00'::BYTEA, 0, 160 + v_n)
            WHEN v_n < 256 THEN '\xd9'::BYTEA || substring(int4send(v_n) FROM 4)
            WHEN v_n < 65536 THEN '\xda'::BYTEA || substring(int4send(v_n) FROM 3)
            ELSE '\xdb'::BYTEA || int4send(v_n)
        END || coalesce(convert_to(v_text, 'UTF8'), ''::BYTEA);
    END LOOP;
    -- The actor (NULL), and the array of six around them.
    v_fields := '\x96'::BYTEA || v_fields || '\xc0'::BYTEA;
    INSERT INTO changes (at, kind, thread, checkpoint_id, interrupt_id, actor, digest)
        VALUES (p_at, p_kind, p_thread, p_checkpoint_id, p_interrupt_id, NULL,
            substring(sha256(v_fields) FROM 1 FOR 8));
END
$fn$;

-- interlock_interrupt_changed --
-- Triggers write the rows, so interlock_append stays as version 5 left it and a replayed
-- append (see p_retried) writes none. Order within a transaction, as `_changes.derive`: the
-- resolutions (each UPDATE's trigger fires as it ends), the new interrupts (the INSERT's, in
-- row order), then the run's end (deferred: it fires at commit). interlock_append moves the
-- thread's head before it resolves or inserts interrupts, so the thread's row names the
-- checkpoint being committed and its time.
CREATE FUNCTION interlock_interrupt_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $fn$
DECLARE
    v_head TEXT;
    v_at DOUBLE PRECISION;
BEGIN
    SELECT t.head_id, t.updated_at INTO v_head, v_at FROM threads t
        WHERE t.thread = NEW.thread;
    PERFORM interlock_change(v_at,
        CASE WHEN TG_OP = 'INSERT' THEN 'interrupt_created'
            ELSE 'interrupt_' || NEW.status END,
        NEW.thread, v_head, NEW.id);
    RETURN NULL;
END
$fn$;

-- changes_interrupt_created --
CREATE TRIGGER changes_interrupt_created AFTER INSERT ON interrupts
    FOR EACH ROW EXECUTE FUNCTION interlock_interrupt_changed();

-- changes_interrupt_left_pending --
CREATE TRIGGER changes_interrupt_left_pending AFTER UPDATE OF status ON interrupts
    FOR EACH ROW WHEN (OLD.status = 'pending' AND NEW.status <> 'pending')
    EXECUTE FUNCTION interlock_interrupt_changed();

-- interlock_run_ended --
CREATE FUNCTION interlock_run_ended() RETURNS TRIGGER LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM interlock_change(NEW.created_at,
        CASE WHEN NEW.status = 'done' THEN 'run_finished' ELSE 'run_failed' END,
        NEW.thread, NEW.id, NULL);
    RETURN NULL;
END
$fn$;

-- changes_run_ended --
-- A step of a run (status ready) is filtered out by WHEN without calling anything.
CREATE CONSTRAINT TRIGGER changes_run_ended AFTER INSERT ON checkpoints
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.status IN ('done', 'failed'))
    EXECUTE FUNCTION interlock_run_ended();
