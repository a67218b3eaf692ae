-- What Workers.install (re)creates, in this order, after procrastinate's own schema: the
-- trigger that queues a thread's continuation in the transaction of each decision, and the
-- one that hands a clashing retry over (see interlock.workers._schema). Every statement is
-- safe to run again.
--
-- Each statement is a psycopg sql.SQL template, filled in by install():
--   {lock_prefix}           literal: the start of a continuation's queueing lock
--   {queue_lock}            literal: the high key of the queueing advisory lock (QUEUE_LOCK)
--   {queue}, {task}         literals: the queue and task name of a continuation's job
--   {continuation_trigger}  identifier: PostgresStore.CONTINUATION_TRIGGER, which the store
--                           looks for to tell whether workers continue its threads
-- A literal brace would have to be doubled ({{ }}); none is needed.

-- queue_continuation --
CREATE OR REPLACE FUNCTION interlock_queue_continuation() RETURNS TRIGGER
LANGUAGE plpgsql AS $fn$
DECLARE
    v_lock TEXT := {lock_prefix} || NEW.thread;
BEGIN
    -- One queuer of the thread at a time (a retry handing over waits for this commit).
    PERFORM pg_advisory_xact_lock({queue_lock}, hashtext(v_lock));
    IF EXISTS (SELECT 1 FROM threads t WHERE t.thread = NEW.thread AND t.lease_owner IS NULL)
        AND NOT EXISTS (SELECT 1 FROM procrastinate_jobs j
            WHERE j.queueing_lock = v_lock AND j.status = 'todo')
    THEN
        BEGIN
            PERFORM procrastinate_defer_jobs_v1(ARRAY[ROW({queue}, {task}, 0, v_lock, v_lock,
                jsonb_build_object('thread', NEW.thread),
                NULL)::procrastinate_job_to_defer_v1]);
        EXCEPTION WHEN unique_violation THEN
            NULL;  -- queued meanwhile by a worker giving the thread back: once is enough
        END;
    END IF;
    RETURN NULL;
END
$fn$;

-- drop_continuation_trigger --
DROP TRIGGER IF EXISTS {continuation_trigger} ON interrupts;

-- continuation_trigger --
-- Deferred: it fires at the decision's commit, when the thread's lease shows who goes on.
CREATE CONSTRAINT TRIGGER {continuation_trigger} AFTER UPDATE OF status ON interrupts
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (OLD.status = 'pending' AND NEW.status IN ('resolved', 'expired'))
    EXECUTE FUNCTION interlock_queue_continuation();

-- hand_over_retry --
CREATE OR REPLACE FUNCTION interlock_hand_over_retry() RETURNS TRIGGER
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_advisory_xact_lock({queue_lock}, hashtext(NEW.queueing_lock));
    IF EXISTS (SELECT 1 FROM procrastinate_jobs j
        WHERE j.queueing_lock = NEW.queueing_lock AND j.status = 'todo' AND j.id <> NEW.id)
    THEN
        -- Another continuation of the thread was queued while this one ran: it goes on with
        -- every decision there is, this one ends instead of clashing on the queueing lock.
        NEW.status := 'cancelled';
        NEW.attempts := OLD.attempts;
        NEW.scheduled_at := OLD.scheduled_at;
    END IF;
    RETURN NEW;
END
$fn$;

-- drop_hand_over_trigger --
DROP TRIGGER IF EXISTS interlock_hand_over_retry ON procrastinate_jobs;

-- hand_over_trigger --
CREATE TRIGGER interlock_hand_over_retry BEFORE UPDATE OF status ON procrastinate_jobs
    FOR EACH ROW WHEN (OLD.status IN ('doing', 'failed') AND NEW.status = 'todo'
        AND NEW.queueing_lock IS NOT NULL AND NEW.task_name = {task})
    EXECUTE FUNCTION interlock_hand_over_retry();
