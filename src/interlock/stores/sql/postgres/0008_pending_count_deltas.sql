-- Version 8 of PostgresStore's schema: the inbox counted per tool without reading a row per
-- interrupt.
-- Released: never edit a statement here (see interlock.stores._postgres_schema).

-- pending_count_deltas --
-- With a million pending, even version 7's index-only scan took ~60 ms. Triggers write what
-- each statement changes about the pending interrupts of each tool into pending_count_deltas,
-- and a tool's count is the sum of its rows there. Writers only ever insert rows (never
-- update a shared counter row), so concurrent appends neither wait for each other's commit
-- on a hot row nor deadlock taking counters in different orders. The counting query folds
-- the rows into one per tool once there are more than a few hundred (see `_postgres_sql`):
-- whoever deletes a row re-inserts its delta in the same statement, so folding never changes
-- a sum, whichever transactions fold at once. The rows of the interrupts already pending are
-- counted last: CREATE TRIGGER has locked out writers by then, so none is missed or counted
-- twice. (A session with session_replication_role = replica fires no trigger: rows it writes
-- are not counted.)
CREATE TABLE pending_count_deltas (
    tool  TEXT,
    delta BIGINT NOT NULL
);

-- interlock_pending_inserted --
CREATE FUNCTION interlock_pending_inserted() RETURNS TRIGGER LANGUAGE plpgsql AS $fn$
BEGIN
    INSERT INTO pending_count_deltas (tool, delta)
        SELECT n.tool, count(*) FROM new_rows n WHERE n.status = 'pending' GROUP BY n.tool;
    RETURN NULL;
END
$fn$;

-- interlock_pending_deleted --
CREATE FUNCTION interlock_pending_deleted() RETURNS TRIGGER LANGUAGE plpgsql AS $fn$
BEGIN
    INSERT INTO pending_count_deltas (tool, delta)
        SELECT o.tool, -count(*) FROM old_rows o WHERE o.status = 'pending' GROUP BY o.tool;
    RETURN NULL;
END
$fn$;

-- interlock_pending_updated --
-- An update is one row at a time (a resolution): a row trigger, called only when the row
-- leaves or enters pending or, pending, changes its tool (which interlock never does).
CREATE FUNCTION interlock_pending_updated() RETURNS TRIGGER LANGUAGE plpgsql AS $fn$
BEGIN
    IF OLD.status = 'pending' THEN
        INSERT INTO pending_count_deltas (tool, delta) VALUES (OLD.tool, -1);
    END IF;
    IF NEW.status = 'pending' THEN
        INSERT INTO pending_count_deltas (tool, delta) VALUES (NEW.tool, 1);
    END IF;
    RETURN NULL;
END
$fn$;

-- pending_counts_inserted --
CREATE TRIGGER pending_counts_inserted AFTER INSERT ON interrupts
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION interlock_pending_inserted();

-- pending_counts_deleted --
CREATE TRIGGER pending_counts_deleted AFTER DELETE ON interrupts
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT
    EXECUTE FUNCTION interlock_pending_deleted();

-- pending_counts_updated --
CREATE TRIGGER pending_counts_updated AFTER UPDATE OF status, tool ON interrupts
    FOR EACH ROW WHEN ((OLD.status = 'pending') IS DISTINCT FROM (NEW.status = 'pending')
        OR (OLD.status = 'pending' AND OLD.tool IS DISTINCT FROM NEW.tool))
    EXECUTE FUNCTION interlock_pending_updated();

-- interlock_pending_truncated --
CREATE FUNCTION interlock_pending_truncated() RETURNS TRIGGER LANGUAGE plpgsql AS $fn$
BEGIN
    DELETE FROM pending_count_deltas;
    RETURN NULL;
END
$fn$;

-- pending_counts_truncated --
CREATE TRIGGER pending_counts_truncated AFTER TRUNCATE ON interrupts
    FOR EACH STATEMENT EXECUTE FUNCTION interlock_pending_truncated();

-- count_pending --
INSERT INTO pending_count_deltas (tool, delta)
    SELECT tool, count(*) FROM interrupts WHERE status = 'pending' GROUP BY tool;

-- drop_interrupts_pending_tool_count --
-- Version 7's index served only the count, which no longer reads the interrupts.
DROP INDEX interrupts_pending_tool_count;
