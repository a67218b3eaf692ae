"""What `Workers.install` writes into the database: procrastinate's schema, and the trigger that
queues a thread's continuation in the transaction of the decision that makes it runnable.

The trigger is the reason a decision is never recorded without its continuation queued, nor
queued twice: it runs inside the decision's own commit (a deferred constraint trigger fires at
commit time, when the thread's lease shows who goes on), whatever process, tool or interlock
version made the decision. It queues when an interrupt leaves ``pending`` answered (resolved,
or expired by the sweeper) and nobody holds the thread's lease: a caller that resumes with
targets holds the lease through its decision and goes on itself, so nothing is queued for it.

A continuation runs without its queueing lock (procrastinate's is only on ``todo`` jobs), so a
decision made while it runs queues the next one. Were the running one then retried (a lost
connection), it would clash with that one on the queueing lock, stay ``doing`` and hold the
thread's lock: a second trigger hands the retry over instead. The job queued meanwhile goes
on, with every decision there is, and the retried one ends ``cancelled``.
"""

from __future__ import annotations

from typing import Any, Final

from psycopg import AsyncConnection, sql

from ..stores._postgres_sql import CONTINUATION_TRIGGER

__all__ = ["INSTALL_LOCK", "QUEUE_LOCK", "install"]

INSTALL_LOCK: Final = 0x696E746C6B776B  # "intlkwk": one installer at a time per database
QUEUE_LOCK: Final = 0x494C4B33
"""High key of the transaction-scoped advisory lock taken by whoever queues or retries a
continuation of a thread (ASCII ``ILK3``); the low key hashes its queueing lock."""

_FUNCTION: Final = """
CREATE OR REPLACE FUNCTION interlock_queue_continuation() RETURNS TRIGGER
LANGUAGE plpgsql AS $fn$
DECLARE
    v_lock TEXT := {prefix} || NEW.thread;
BEGIN
    -- One queuer of the thread at a time (a retry handing over waits for this commit).
    PERFORM pg_advisory_xact_lock({key}, hashtext(v_lock));
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
$fn$
"""

HAND_OVER_TRIGGER: Final = "interlock_hand_over_retry"

_HAND_OVER_FUNCTION: Final = """
CREATE OR REPLACE FUNCTION interlock_hand_over_retry() RETURNS TRIGGER
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_advisory_xact_lock({key}, hashtext(NEW.queueing_lock));
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
$fn$
"""

_HAND_OVER: Final = f"""
CREATE TRIGGER {HAND_OVER_TRIGGER} BEFORE UPDATE OF status ON procrastinate_jobs
    FOR EACH ROW WHEN (OLD.status IN ('doing', 'failed') AND NEW.status = 'todo'
        AND NEW.queueing_lock IS NOT NULL AND NEW.task_name = {{task}})
    EXECUTE FUNCTION interlock_hand_over_retry()
"""

_TRIGGER: Final = f"""
CREATE CONSTRAINT TRIGGER {CONTINUATION_TRIGGER} AFTER UPDATE OF status ON interrupts
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (OLD.status = 'pending' AND NEW.status IN ('resolved', 'expired'))
    EXECUTE FUNCTION interlock_queue_continuation()
"""


async def install(
    conn: AsyncConnection[Any], *, schema_sql: str, queue: str, task: str, lock_prefix: str
) -> bool:
    """Create procrastinate's schema when missing, and (re)create the continuation trigger.

    One transaction under an advisory lock, so workers starting together install once.
    Returns whether procrastinate's schema was created by this call.
    """
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (INSTALL_LOCK,))
        cur = await conn.execute("SELECT to_regclass('procrastinate_jobs') IS NULL")
        row = await cur.fetchone()
        created = bool(row and row[0])
        if created:
            await conn.execute(schema_sql)  # procrastinate's own SQL, as it applies it
        key = sql.Literal(QUEUE_LOCK)
        body = sql.SQL(_FUNCTION).format(
            prefix=sql.Literal(lock_prefix),
            queue=sql.Literal(queue),
            task=sql.Literal(task),
            key=key,
        )
        await conn.execute(body)
        await conn.execute(f"DROP TRIGGER IF EXISTS {CONTINUATION_TRIGGER} ON interrupts")
        await conn.execute(_TRIGGER)
        await conn.execute(sql.SQL(_HAND_OVER_FUNCTION).format(key=key))
        await conn.execute(f"DROP TRIGGER IF EXISTS {HAND_OVER_TRIGGER} ON procrastinate_jobs")
        await conn.execute(sql.SQL(_HAND_OVER).format(task=sql.Literal(task)))
    return created
