"""The PostgreSQL schema of `PostgresStore` and its migrations (the statements it runs:
`_postgres_sql`).

The applied versions are rows of ``schema_version``. To change the schema, append a step to
`MIGRATIONS`: the step at index ``i`` takes a database from version ``i`` to ``i + 1``. All
pending steps run in one transaction that first takes a transaction-scoped advisory lock, so
concurrent migrators queue up and exactly one of them applies each step. Nothing here needs
session state (no session locks, no prepared statements): it works behind a transaction-pooling
proxy.

Why this module is long: it is the schema's history. A step, once released, is never edited
(databases out there were migrated by its exact text), so each version's SQL stays here
verbatim, including the server-side ``interlock_append`` of version 4 that version 5 replaces.
Splitting it would only scatter one ordered list. (Version 6 adds the change feed with triggers
rather than a third copy of ``interlock_append``.)
"""

from __future__ import annotations

import time
from typing import Any, Final

from psycopg import Connection

__all__ = ["MIGRATIONS", "MIGRATION_LOCK", "SCHEMA_VERSION", "SchemaMismatch", "migrate"]

MIGRATION_LOCK: Final = 0x494C4B31
"""Key of the ``pg_advisory_xact_lock`` that serialises migrations (ASCII ``ILK1``)."""

_V1: Final = (
    """
    CREATE TABLE threads (
        thread     TEXT PRIMARY KEY,
        head_id    TEXT NOT NULL,
        head_seq   BIGINT NOT NULL,
        status     TEXT NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL
    )
    """,
    """
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
    )
    """,
    # ord is the insertion order that breaks created_at ties in the inbox.
    """
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
    )
    """,
    # The inbox across threads, and by key: partial, so they hold only pending interrupts.
    "CREATE INDEX interrupts_pending ON interrupts (created_at, ord) WHERE status = 'pending'",
    "CREATE INDEX interrupts_pending_key ON interrupts (key, created_at, ord) "
    "WHERE status = 'pending'",
    # Full, not partial: with status as an equality prefix it serves the per-thread inbox in
    # O(pending of the thread) and also lets delete_thread find resolved interrupts.
    "CREATE INDEX interrupts_thread ON interrupts (thread, status, created_at, ord)",
)

_V2: Final = (
    """
    CREATE TABLE pause_requests (
        thread       TEXT PRIMARY KEY,
        kind         TEXT NOT NULL,
        requested_at DOUBLE PRECISION NOT NULL
    )
    """,
)

_V3: Final = (
    # The lease: who runs the thread now and until when; the fencing token only grows.
    "ALTER TABLE threads ADD COLUMN lease_owner TEXT",
    "ALTER TABLE threads ADD COLUMN lease_token BIGINT NOT NULL DEFAULT 0",
    "ALTER TABLE threads ADD COLUMN lease_expires DOUBLE PRECISION NOT NULL DEFAULT 0",
    "ALTER TABLE interrupts ADD COLUMN tool TEXT",
    "CREATE INDEX interrupts_pending_tool ON interrupts (tool, created_at, ord) "
    "WHERE status = 'pending'",
    """
    CREATE TABLE effects (
        thread      TEXT NOT NULL,
        key         TEXT NOT NULL,
        name        TEXT NOT NULL,
        status      TEXT NOT NULL,
        attempt     BIGINT NOT NULL,
        started_at  DOUBLE PRECISION NOT NULL,
        finished_at DOUBLE PRECISION,
        result      BYTEA,
        PRIMARY KEY (thread, key)
    )
    """,
    """
    CREATE TABLE audit (
        thread TEXT NOT NULL,
        seq    BIGINT NOT NULL,
        at     DOUBLE PRECISION NOT NULL,
        kind   TEXT NOT NULL,
        actor  TEXT,
        data   BYTEA NOT NULL,
        prev   BYTEA NOT NULL,
        hash   BYTEA NOT NULL,
        PRIMARY KEY (thread, seq)
    )
    """,
)

_V4: Final = (
    # A whole append_checkpoint in one statement, hence one round trip: lock the thread's row,
    # check the lease (as `lease_after`) and the head (as `head_mismatch`), move both, resolve,
    # insert, and chain the audit entries. A refusal raises SQLSTATE IL001 with a JSON message
    # that the client turns into the typed error; raising rolls back whatever was written.
    # Audit hashes are SHA-256 over prev || msgpack([thread, seq, at, kind, actor, data]): the
    # client sends the encoding before seq (a_prefix) and after it (a_suffix), and only seq,
    # known under the row lock, is encoded here, the way msgspec encodes a positive integer.
    """
    CREATE FUNCTION interlock_append(
        p_thread TEXT, p_seq BIGINT, p_id TEXT, p_parent_id TEXT, p_step BIGINT,
        p_base_seq BIGINT, p_created_at DOUBLE PRECISION, p_source TEXT, p_status TEXT,
        p_body BYTEA,
        p_expected_head TEXT, p_fenced BOOLEAN, p_owner TEXT, p_token BIGINT,
        p_ttl DOUBLE PRECISION, p_release BOOLEAN, p_now DOUBLE PRECISION, p_retried BOOLEAN,
        r_id TEXT[], r_status TEXT[], r_at DOUBLE PRECISION[], r_resolution BYTEA[],
        i_id TEXT[], i_key TEXT[], i_address TEXT[], i_kind TEXT[], i_status TEXT[],
        i_created_at DOUBLE PRECISION[], i_deadline DOUBLE PRECISION[], i_body BYTEA[],
        i_resolved_at DOUBLE PRECISION[], i_resolution BYTEA[], i_tool TEXT[],
        a_prefix BYTEA, a_kind TEXT[], a_actor TEXT[], a_data BYTEA[], a_suffix BYTEA[]
    ) RETURNS BIGINT LANGUAGE plpgsql AS $fn$
    DECLARE
        v_found BOOLEAN;
        v_head_id TEXT;
        v_head_seq BIGINT;
        v_owner TEXT;
        v_token BIGINT := 0;
        v_expires DOUBLE PRECISION := 0;
        v_state TEXT;
        v_pending JSON;
        v_seq BIGINT;
        v_int BYTEA;
        v_prev BYTEA;
        v_hash BYTEA;
        v_n INTEGER;
    BEGIN
        SELECT t.head_id, t.head_seq, t.lease_owner, t.lease_token, t.lease_expires
            INTO v_head_id, v_head_seq, v_owner, v_token, v_expires
            FROM threads t WHERE t.thread = p_thread FOR UPDATE;
        v_found := FOUND;
        IF NOT v_found THEN
            v_owner := NULL;
            v_token := 0;
            v_expires := 0;
        ELSIF p_retried AND v_head_id = p_id THEN
            -- This very append committed on a connection that broke before the reply came.
            RETURN v_token;
        END IF;

        -- The lease, as lease_after decides it.
        IF NOT p_fenced OR p_token IS NULL THEN
            IF v_owner IS NOT NULL AND v_expires > p_now THEN
                RAISE EXCEPTION USING ERRCODE = 'IL001', MESSAGE = json_build_object(
                    'error', 'lease', 'owner', v_owner, 'expires', v_expires)::TEXT;
            END IF;
            IF p_fenced THEN
                v_token := v_token + 1;
            END IF;
        ELSIF p_token <> v_token THEN
            RAISE EXCEPTION USING ERRCODE = 'IL001', MESSAGE = json_build_object(
                'error', 'fenced', 'current', v_token)::TEXT;
        END IF;
        IF p_fenced THEN
            IF p_release THEN
                v_owner := NULL;
                v_expires := 0;
            ELSE
                v_owner := p_owner;
                v_expires := p_now + p_ttl;
            END IF;
        END IF;

        -- The head, as head_mismatch decides it (the client words the error).
        IF (NOT v_found AND (p_expected_head IS NOT NULL OR p_seq <> 1))
            OR (v_found AND (p_expected_head IS NULL OR v_head_id <> p_expected_head
                             OR p_seq <> v_head_seq + 1)) THEN
            RAISE EXCEPTION USING ERRCODE = 'IL001', MESSAGE = json_build_object(
                'error', 'head', 'head_id', v_head_id, 'head_seq', v_head_seq)::TEXT;
        END IF;

        IF v_found THEN
            UPDATE threads SET head_id = p_id, head_seq = p_seq, status = p_status,
                updated_at = p_created_at, lease_owner = v_owner, lease_token = v_token,
                lease_expires = v_expires
                WHERE thread = p_thread;
        ELSE
            INSERT INTO threads (thread, head_id, head_seq, status, updated_at, lease_owner,
                lease_token, lease_expires)
                VALUES (p_thread, p_id, p_seq, p_status, p_created_at, v_owner, v_token,
                    v_expires)
                ON CONFLICT (thread) DO NOTHING;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            IF v_n = 0 THEN
                RAISE EXCEPTION USING ERRCODE = 'IL001', MESSAGE = json_build_object(
                    'error', 'created')::TEXT;
            END IF;
        END IF;

        -- Resolutions, each a compare-and-set out of pending, in order.
        FOR i IN 1 .. coalesce(array_length(r_id, 1), 0) LOOP
            UPDATE interrupts SET status = r_status[i], resolved_at = r_at[i],
                resolution = r_resolution[i]
                WHERE id = r_id[i] AND thread = p_thread AND status = 'pending';
            IF NOT FOUND THEN
                SELECT t.status INTO v_state FROM interrupts t
                    WHERE t.id = r_id[i] AND t.thread = p_thread;
                IF FOUND THEN
                    RAISE EXCEPTION USING ERRCODE = 'IL001', MESSAGE = json_build_object(
                        'error', 'resolved', 'id', r_id[i], 'status', v_state)::TEXT;
                END IF;
                -- What is pending once this rolls back: the earlier resolutions undone.
                SELECT coalesce(json_agg(t.id ORDER BY t.created_at, t.ord), '[]'::JSON)
                    INTO v_pending FROM interrupts t
                    WHERE t.thread = p_thread
                    AND (t.status = 'pending' OR t.id = ANY (r_id[1:i - 1]));
                RAISE EXCEPTION USING ERRCODE = 'IL001', MESSAGE = json_build_object(
                    'error', 'unknown', 'id', r_id[i], 'pending', v_pending)::TEXT;
            END IF;
        END LOOP;

        -- The new rows.
        INSERT INTO checkpoints (thread, seq, id, parent_id, step, base_seq, created_at, source,
            status, body)
            VALUES (p_thread, p_seq, p_id, p_parent_id, p_step, p_base_seq, p_created_at,
                p_source, p_status, p_body);
        IF coalesce(array_length(i_id, 1), 0) > 0 THEN
            INSERT INTO interrupts (id, thread, checkpoint_id, key, address, kind, status,
                created_at, deadline, body, resolved_at, resolution, tool)
                SELECT u.id, p_thread, p_id, u.key, u.address, u.kind, u.status, u.created_at,
                    u.deadline, u.body, u.resolved_at, u.resolution, u.tool
                FROM unnest(i_id, i_key, i_address, i_kind, i_status, i_created_at,
                    i_deadline, i_body, i_resolved_at, i_resolution, i_tool)
                    WITH ORDINALITY AS u(id, key, address, kind, status, created_at, deadline,
                        body, resolved_at, resolution, tool, n)
                ORDER BY u.n;
        END IF;

        -- The audit entries, chained after the thread's last one.
        IF coalesce(array_length(a_kind, 1), 0) > 0 THEN
            SELECT t.seq, t.hash INTO v_seq, v_prev FROM audit t
                WHERE t.thread = p_thread ORDER BY t.seq DESC LIMIT 1;
            IF NOT FOUND THEN
                v_seq := 0;
                v_prev := decode(repeat('00', 32), 'hex');
            END IF;
            FOR i IN 1 .. array_length(a_kind, 1) LOOP
                v_seq := v_seq + 1;
                v_int := CASE
                    WHEN v_seq < 128 THEN substring(int8send(v_seq) FROM 8)
                    WHEN v_seq < 256 THEN decode('cc', 'hex') || substring(int8send(v_seq) FROM 8)
                    WHEN v_seq < 65536 THEN decode('cd', 'hex') || substring(int8send(v_seq) FROM 7)
                    WHEN v_seq < 4294967296
                        THEN decode('ce', 'hex') || substring(int8send(v_seq) FROM 5)
                    ELSE decode('cf', 'hex') || int8send(v_seq)
                END;
                v_hash := sha256(v_prev || a_prefix || v_int || a_suffix[i]);
                INSERT INTO audit (thread, seq, at, kind, actor, data, prev, hash)
                    VALUES (p_thread, v_seq, p_now, a_kind[i], a_actor[i], a_data[i], v_prev,
                        v_hash);
                v_prev := v_hash;
            END LOOP;
        END IF;
        RETURN v_token;
    END
    $fn$
    """,
)

_V5: Final = (
    # Digests of each row's columns, checked on every read (see `interlock.stores._rows`,
    # whose encoding interlock_field reproduces). The client computes the digests of what it
    # writes; only the lease an append takes is decided here, so its digest is computed here.
    "ALTER TABLE threads ADD COLUMN digest BYTEA, ADD COLUMN lease_digest BYTEA",
    "ALTER TABLE checkpoints ADD COLUMN digest BYTEA",
    "ALTER TABLE interrupts ADD COLUMN digest BYTEA",
    # msgspec's msgpack encoding of one value of each column type (the smallest form of an
    # integer, float64 for a real), and the digest of an array of n of them.
    """
    CREATE FUNCTION interlock_field(v TEXT) RETURNS BYTEA IMMUTABLE LANGUAGE SQL AS $$
        SELECT CASE
            WHEN v IS NULL THEN '\\xc0'::BYTEA
            WHEN octet_length(v) < 32
                THEN set_byte('\\x00'::BYTEA, 0, 160 + octet_length(v)) || convert_to(v, 'UTF8')
            WHEN octet_length(v) < 256 THEN '\\xd9'::BYTEA
                || substring(int4send(octet_length(v)) FROM 4) || convert_to(v, 'UTF8')
            WHEN octet_length(v) < 65536 THEN '\\xda'::BYTEA
                || substring(int4send(octet_length(v)) FROM 3) || convert_to(v, 'UTF8')
            ELSE '\\xdb'::BYTEA || int4send(octet_length(v)) || convert_to(v, 'UTF8')
        END
    $$
    """,
    """
    CREATE FUNCTION interlock_field(v BIGINT) RETURNS BYTEA IMMUTABLE LANGUAGE SQL AS $$
        SELECT CASE
            WHEN v IS NULL THEN '\\xc0'::BYTEA
            WHEN v >= 0 AND v < 128 THEN substring(int8send(v) FROM 8)
            WHEN v >= 0 AND v < 256 THEN '\\xcc'::BYTEA || substring(int8send(v) FROM 8)
            WHEN v >= 0 AND v < 65536 THEN '\\xcd'::BYTEA || substring(int8send(v) FROM 7)
            WHEN v >= 0 AND v < 4294967296 THEN '\\xce'::BYTEA || substring(int8send(v) FROM 5)
            WHEN v >= 0 THEN '\\xcf'::BYTEA || int8send(v)
            WHEN v >= -32 THEN substring(int8send(v) FROM 8)
            WHEN v >= -128 THEN '\\xd0'::BYTEA || substring(int8send(v) FROM 8)
            WHEN v >= -32768 THEN '\\xd1'::BYTEA || substring(int8send(v) FROM 7)
            WHEN v >= -2147483648 THEN '\\xd2'::BYTEA || substring(int8send(v) FROM 5)
            ELSE '\\xd3'::BYTEA || int8send(v)
        END
    $$
    """,
    """
    CREATE FUNCTION interlock_field(v DOUBLE PRECISION) RETURNS BYTEA IMMUTABLE LANGUAGE SQL
    AS $$
        SELECT CASE WHEN v IS NULL THEN '\\xc0'::BYTEA ELSE '\\xcb'::BYTEA || float8send(v) END
    $$
    """,
    """
    CREATE FUNCTION interlock_field(v BYTEA) RETURNS BYTEA IMMUTABLE LANGUAGE SQL AS $$
        SELECT CASE
            WHEN v IS NULL THEN '\\xc0'::BYTEA
            WHEN length(v) < 256 THEN '\\xc4'::BYTEA || substring(int4send(length(v)) FROM 4) || v
            WHEN length(v) < 65536
                THEN '\\xc5'::BYTEA || substring(int4send(length(v)) FROM 3) || v
            ELSE '\\xc6'::BYTEA || int4send(length(v)) || v
        END
    $$
    """,
    # The digest of n fields (n < 16: a msgpack fixarray).
    """
    CREATE FUNCTION interlock_digest(n INTEGER, fields BYTEA) RETURNS BYTEA IMMUTABLE
    LANGUAGE SQL AS $$
        SELECT substring(sha256(set_byte('\\x00'::BYTEA, 0, 144 + n) || fields) FROM 1 FOR 8)
    $$
    """,
    """
    UPDATE threads SET
        digest = interlock_digest(5, interlock_field(thread) || interlock_field(head_id)
            || interlock_field(head_seq) || interlock_field(status)
            || interlock_field(updated_at)),
        lease_digest = interlock_digest(4, interlock_field(thread) || interlock_field(lease_owner)
            || interlock_field(lease_token) || interlock_field(lease_expires))
    """,
    """
    UPDATE checkpoints SET digest = interlock_digest(10, interlock_field(thread)
        || interlock_field(seq) || interlock_field(id) || interlock_field(parent_id)
        || interlock_field(step) || interlock_field(base_seq) || interlock_field(created_at)
        || interlock_field(source) || interlock_field(status) || interlock_field(body))
    """,
    """
    UPDATE interrupts SET digest = interlock_digest(13, interlock_field(id)
        || interlock_field(thread) || interlock_field(checkpoint_id) || interlock_field(key)
        || interlock_field(address) || interlock_field(kind) || interlock_field(status)
        || interlock_field(created_at) || interlock_field(deadline) || interlock_field(body)
        || interlock_field(resolved_at) || interlock_field(resolution) || interlock_field(tool))
    """,
    # The append of version 4, now writing and checking the digests.
    "DROP FUNCTION interlock_append",
    """
    CREATE FUNCTION interlock_append(
        p_thread TEXT, p_seq BIGINT, p_id TEXT, p_parent_id TEXT, p_step BIGINT,
        p_base_seq BIGINT, p_created_at DOUBLE PRECISION, p_source TEXT, p_status TEXT,
        p_body BYTEA, p_digest BYTEA, p_head_digest BYTEA,
        p_expected_head TEXT, p_fenced BOOLEAN, p_owner TEXT, p_token BIGINT,
        p_ttl DOUBLE PRECISION, p_release BOOLEAN, p_now DOUBLE PRECISION, p_retried BOOLEAN,
        r_id TEXT[], r_status TEXT[], r_at DOUBLE PRECISION[], r_resolution BYTEA[],
        i_id TEXT[], i_key TEXT[], i_address TEXT[], i_kind TEXT[], i_status TEXT[],
        i_created_at DOUBLE PRECISION[], i_deadline DOUBLE PRECISION[], i_body BYTEA[],
        i_resolved_at DOUBLE PRECISION[], i_resolution BYTEA[], i_tool TEXT[],
        i_digest BYTEA[],
        a_prefix BYTEA, a_kind TEXT[], a_actor TEXT[], a_data BYTEA[], a_suffix BYTEA[]
    ) RETURNS BIGINT LANGUAGE plpgsql AS $fn$
    DECLARE
        v_found BOOLEAN;
        v_head_id TEXT;
        v_head_seq BIGINT;
        v_owner TEXT;
        v_token BIGINT := 0;
        v_expires DOUBLE PRECISION := 0;
        v_state TEXT;
        v_pending JSON;
        v_seq BIGINT;
        v_int BYTEA;
        v_prev BYTEA;
        v_hash BYTEA;
        v_n INTEGER;
        v_status TEXT;
        v_updated DOUBLE PRECISION;
        v_digest BYTEA;
        v_lease_digest BYTEA;
    BEGIN
        SELECT t.head_id, t.head_seq, t.lease_owner, t.lease_token, t.lease_expires, t.status,
            t.updated_at, t.digest, t.lease_digest
            INTO v_head_id, v_head_seq, v_owner, v_token, v_expires, v_status, v_updated,
                v_digest, v_lease_digest
            FROM threads t WHERE t.thread = p_thread FOR UPDATE;
        v_found := FOUND;
        IF v_found AND (v_digest IS DISTINCT FROM interlock_digest(5, interlock_field(p_thread)
                || interlock_field(v_head_id) || interlock_field(v_head_seq)
                || interlock_field(v_status) || interlock_field(v_updated))
            OR v_lease_digest IS DISTINCT FROM interlock_digest(4, interlock_field(p_thread)
                || interlock_field(v_owner) || interlock_field(v_token)
                || interlock_field(v_expires))) THEN
            RAISE EXCEPTION USING ERRCODE = 'IL001', MESSAGE = json_build_object(
                'error', 'corrupt', 'what', 'the head of the thread')::TEXT;
        END IF;
        IF NOT v_found THEN
            v_owner := NULL;
            v_token := 0;
            v_expires := 0;
        ELSIF p_retried AND v_head_id = p_id THEN
            -- This very append committed on a connection that broke before the reply came.
            RETURN v_token;
        END IF;

        -- The lease, as lease_after decides it.
        IF NOT p_fenced OR p_token IS NULL THEN
            IF v_owner IS NOT NULL AND v_expires > p_now THEN
                RAISE EXCEPTION USING ERRCODE = 'IL001', MESSAGE = json_build_object(
                    'error', 'lease', 'owner', v_owner, 'expires', v_expires)::TEXT;
            END IF;
            IF p_fenced THEN
                v_token := v_token + 1;
            END IF;
        ELSIF p_token <> v_token THEN
            RAISE EXCEPTION USING ERRCODE = 'IL001', MESSAGE = json_build_object(
                'error', 'fenced', 'current', v_token)::TEXT;
        END IF;
        IF p_fenced THEN
            IF p_release THEN
                v_owner := NULL;
                v_expires := 0;
            ELSE
                v_owner := p_owner;
                v_expires := p_now + p_ttl;
            END IF;
        END IF;

        -- The head, as head_mismatch decides it (the client words the error).
        IF (NOT v_found AND (p_expected_head IS NOT NULL OR p_seq <> 1))
            OR (v_found AND (p_expected_head IS NULL OR v_head_id <> p_expected_head
                             OR p_seq <> v_head_seq + 1)) THEN
            RAISE EXCEPTION USING ERRCODE = 'IL001', MESSAGE = json_build_object(
                'error', 'head', 'head_id', v_head_id, 'head_seq', v_head_seq)::TEXT;
        END IF;

        v_lease_digest := interlock_digest(4, interlock_field(p_thread) || interlock_field(v_owner)
            || interlock_field(v_token) || interlock_field(v_expires));
        IF v_found THEN
            UPDATE threads SET head_id = p_id, head_seq = p_seq, status = p_status,
                updated_at = p_created_at, digest = p_head_digest, lease_owner = v_owner,
                lease_token = v_token, lease_expires = v_expires, lease_digest = v_lease_digest
                WHERE thread = p_thread;
        ELSE
            INSERT INTO threads (thread, head_id, head_seq, status, updated_at, digest,
                lease_owner, lease_token, lease_expires, lease_digest)
                VALUES (p_thread, p_id, p_seq, p_status, p_created_at, p_head_digest, v_owner,
                    v_token, v_expires, v_lease_digest)
                ON CONFLICT (thread) DO NOTHING;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            IF v_n = 0 THEN
                RAISE EXCEPTION USING ERRCODE = 'IL001', MESSAGE = json_build_object(
                    'error', 'created')::TEXT;
            END IF;
        END IF;

        -- Resolutions, each a compare-and-set out of pending, in order.
        FOR i IN 1 .. coalesce(array_length(r_id, 1), 0) LOOP
            UPDATE interrupts SET status = r_status[i], resolved_at = r_at[i],
                resolution = r_resolution[i],
                digest = interlock_digest(13, interlock_field(id) || interlock_field(thread)
                    || interlock_field(checkpoint_id) || interlock_field(key)
                    || interlock_field(address) || interlock_field(kind)
                    || interlock_field(r_status[i]) || interlock_field(created_at)
                    || interlock_field(deadline) || interlock_field(body)
                    || interlock_field(r_at[i]) || interlock_field(r_resolution[i])
                    || interlock_field(tool))
                WHERE id = r_id[i] AND thread = p_thread AND status = 'pending'
                AND digest = interlock_digest(13, interlock_field(id) || interlock_field(thread)
                    || interlock_field(checkpoint_id) || interlock_field(key)
                    || interlock_field(address) || interlock_field(kind)
                    || interlock_field(status) || interlock_field(created_at)
                    || interlock_field(deadline) || interlock_field(body)
                    || interlock_field(resolved_at) || interlock_field(resolution)
                    || interlock_field(tool));
            IF NOT FOUND THEN
                SELECT t.status INTO v_state FROM interrupts t
                    WHERE t.id = r_id[i] AND t.thread = p_thread;
                IF FOUND AND v_state = 'pending' THEN
                    RAISE EXCEPTION USING ERRCODE = 'IL001', MESSAGE = json_build_object(
                        'error', 'corrupt', 'what', 'interrupt ' || r_id[i])::TEXT;
                END IF;
                IF FOUND THEN
                    RAISE EXCEPTION USING ERRCODE = 'IL001', MESSAGE = json_build_object(
                        'error', 'resolved', 'id', r_id[i], 'status', v_state)::TEXT;
                END IF;
                -- What is pending once this rolls back: the earlier resolutions undone.
                SELECT coalesce(json_agg(t.id ORDER BY t.created_at, t.ord), '[]'::JSON)
                    INTO v_pending FROM interrupts t
                    WHERE t.thread = p_thread
                    AND (t.status = 'pending' OR t.id = ANY (r_id[1:i - 1]));
                RAISE EXCEPTION USING ERRCODE = 'IL001', MESSAGE = json_build_object(
                    'error', 'unknown', 'id', r_id[i], 'pending', v_pending)::TEXT;
            END IF;
        END LOOP;

        -- The new rows.
        INSERT INTO checkpoints (thread, seq, id, parent_id, step, base_seq, created_at, source,
            status, body, digest)
            VALUES (p_thread, p_seq, p_id, p_parent_id, p_step, p_base_seq, p_created_at,
                p_source, p_status, p_body, p_digest);
        IF coalesce(array_length(i_id, 1), 0) > 0 THEN
            INSERT INTO interrupts (id, thread, checkpoint_id, key, address, kind, status,
                created_at, deadline, body, resolved_at, resolution, tool, digest)
                SELECT u.id, p_thread, p_id, u.key, u.address, u.kind, u.status, u.created_at,
                    u.deadline, u.body, u.resolved_at, u.resolution, u.tool, u.digest
                FROM unnest(i_id, i_key, i_address, i_kind, i_status, i_created_at,
                    i_deadline, i_body, i_resolved_at, i_resolution, i_tool, i_digest)
                    WITH ORDINALITY AS u(id, key, address, kind, status, created_at, deadline,
                        body, resolved_at, resolution, tool, digest, n)
                ORDER BY u.n;
        END IF;

        -- The audit entries, chained after the thread's last one.
        IF coalesce(array_length(a_kind, 1), 0) > 0 THEN
            SELECT t.seq, t.hash INTO v_seq, v_prev FROM audit t
                WHERE t.thread = p_thread ORDER BY t.seq DESC LIMIT 1;
            IF NOT FOUND THEN
                v_seq := 0;
                v_prev := decode(repeat('00', 32), 'hex');
            END IF;
            FOR i IN 1 .. array_length(a_kind, 1) LOOP
                v_seq := v_seq + 1;
                v_int := CASE
                    WHEN v_seq < 128 THEN substring(int8send(v_seq) FROM 8)
                    WHEN v_seq < 256 THEN decode('cc', 'hex') || substring(int8send(v_seq) FROM 8)
                    WHEN v_seq < 65536 THEN decode('cd', 'hex') || substring(int8send(v_seq) FROM 7)
                    WHEN v_seq < 4294967296
                        THEN decode('ce', 'hex') || substring(int8send(v_seq) FROM 5)
                    ELSE decode('cf', 'hex') || int8send(v_seq)
                END;
                v_hash := sha256(v_prev || a_prefix || v_int || a_suffix[i]);
                INSERT INTO audit (thread, seq, at, kind, actor, data, prev, hash)
                    VALUES (p_thread, v_seq, p_now, a_kind[i], a_actor[i], a_data[i], v_prev,
                        v_hash);
                v_prev := v_hash;
            END LOOP;
        END IF;
        RETURN v_token;
    END
    $fn$
    """,
)

_V6: Final = (
    # The change feed (`Store.changes`). A sequence is not commit-ordered here: a transaction
    # that took seq 5 may commit after the one that took seq 6 is visible, and a follower that
    # had moved past 6 would never see 5. So each row also records the id of the transaction
    # that wrote it, and the feed only ever returns rows of transactions older than the oldest
    # one still running (pg_snapshot_xmin): those are all finished, so that part of the feed
    # never changes again, and it only grows at its end. Ordered by (txid, seq), with the
    # cursor naming both. Invariant: txid order is commit order for the changes of one thread
    # (an append that follows another names that one's checkpoint as its expected head, so it
    # began, and got its id, after that one committed). A transaction left open delays the
    # feed until it ends; none is lost.
    # The feed starts empty in a database migrated from an earlier version.
    """
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
    )
    """,
    # One change row, with the digest `_rows.change_rows` computes: msgspec's msgpack encoding
    # of its six columns, as interlock_field writes it, but inline (PL/pgSQL keeps its plans
    # for the session, where each call of those SQL functions is planned anew and costs more
    # than the whole row).
    """
    CREATE FUNCTION interlock_change(p_at DOUBLE PRECISION, p_kind TEXT, p_thread TEXT,
        p_checkpoint_id TEXT, p_interrupt_id TEXT) RETURNS VOID LANGUAGE plpgsql AS $fn$
    DECLARE
        v_fields BYTEA := '\\xcb'::BYTEA || float8send(p_at);
        v_text TEXT;
        v_n INTEGER;
    BEGIN
        FOREACH v_text IN ARRAY ARRAY[p_kind, p_thread, p_checkpoint_id, p_interrupt_id] LOOP
            v_n := octet_length(v_text);
            v_fields := v_fields || CASE
                WHEN v_text IS NULL THEN '\\xc0'::BYTEA
                WHEN v_n < 32 THEN set_byte('\\x00'::BYTEA, 0, 160 + v_n)
                WHEN v_n < 256 THEN '\\xd9'::BYTEA || substring(int4send(v_n) FROM 4)
                WHEN v_n < 65536 THEN '\\xda'::BYTEA || substring(int4send(v_n) FROM 3)
                ELSE '\\xdb'::BYTEA || int4send(v_n)
            END || coalesce(convert_to(v_text, 'UTF8'), ''::BYTEA);
        END LOOP;
        -- The actor (NULL), and the array of six around them.
        v_fields := '\\x96'::BYTEA || v_fields || '\\xc0'::BYTEA;
        INSERT INTO changes (at, kind, thread, checkpoint_id, interrupt_id, actor, digest)
            VALUES (p_at, p_kind, p_thread, p_checkpoint_id, p_interrupt_id, NULL,
                substring(sha256(v_fields) FROM 1 FOR 8));
    END
    $fn$
    """,
    # Triggers write the rows, so interlock_append stays as version 5 left it and a replayed
    # append (see p_retried) writes none. Order within a transaction, as `_changes.derive`:
    # the resolutions (each UPDATE's trigger fires as it ends), the new interrupts (the
    # INSERT's, in row order), then the run's end (deferred: it fires at commit).
    # interlock_append moves the thread's head before it resolves or inserts interrupts, so
    # the thread's row names the checkpoint being committed and its time.
    """
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
    $fn$
    """,
    """
    CREATE TRIGGER changes_interrupt_created AFTER INSERT ON interrupts
        FOR EACH ROW EXECUTE FUNCTION interlock_interrupt_changed()
    """,
    """
    CREATE TRIGGER changes_interrupt_left_pending AFTER UPDATE OF status ON interrupts
        FOR EACH ROW WHEN (OLD.status = 'pending' AND NEW.status <> 'pending')
        EXECUTE FUNCTION interlock_interrupt_changed()
    """,
    """
    CREATE FUNCTION interlock_run_ended() RETURNS TRIGGER LANGUAGE plpgsql AS $fn$
    BEGIN
        PERFORM interlock_change(NEW.created_at,
            CASE WHEN NEW.status = 'done' THEN 'run_finished' ELSE 'run_failed' END,
            NEW.thread, NEW.id, NULL);
        RETURN NULL;
    END
    $fn$
    """,
    # A step of a run (status ready) is filtered out by WHEN without calling anything.
    """
    CREATE CONSTRAINT TRIGGER changes_run_ended AFTER INSERT ON checkpoints
        DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW WHEN (NEW.status IN ('done', 'failed'))
        EXECUTE FUNCTION interlock_run_ended()
    """,
)

_V7: Final = (
    # The inbox counted per tool (`Store.pending_counts`) reads every pending row's tool: an
    # index of the tool alone, which B-tree deduplication keeps to a few bytes per row, lets
    # that be an index-only scan of a tenth of what (tool, created_at, ord) holds.
    "CREATE INDEX interrupts_pending_tool_count ON interrupts (tool) WHERE status = 'pending'",
)

_V8: Final = (
    # The inbox counted per tool without reading a row per interrupt: with a million pending,
    # even version 7's index-only scan took ~60 ms. Triggers write what each statement changes
    # about the pending interrupts of each tool into pending_count_deltas, and a tool's count
    # is the sum of its rows there. Writers only ever insert rows (never update a shared
    # counter row), so concurrent appends neither wait for each other's commit on a hot row
    # nor deadlock taking counters in different orders. The counting query folds the rows into
    # one per tool once there are more than a few hundred (see `_postgres_sql`): whoever
    # deletes a row re-inserts its delta in the same statement, so folding never changes a
    # sum, whichever transactions fold at once. The rows of the interrupts already pending
    # are counted last: CREATE TRIGGER has locked out writers by then, so none is missed or
    # counted twice. (A session with session_replication_role = replica fires no trigger:
    # rows it writes are not counted.)
    """
    CREATE TABLE pending_count_deltas (
        tool  TEXT,
        delta BIGINT NOT NULL
    )
    """,
    """
    CREATE FUNCTION interlock_pending_inserted() RETURNS TRIGGER LANGUAGE plpgsql AS $fn$
    BEGIN
        INSERT INTO pending_count_deltas (tool, delta)
            SELECT n.tool, count(*) FROM new_rows n WHERE n.status = 'pending' GROUP BY n.tool;
        RETURN NULL;
    END
    $fn$
    """,
    """
    CREATE FUNCTION interlock_pending_deleted() RETURNS TRIGGER LANGUAGE plpgsql AS $fn$
    BEGIN
        INSERT INTO pending_count_deltas (tool, delta)
            SELECT o.tool, -count(*) FROM old_rows o WHERE o.status = 'pending' GROUP BY o.tool;
        RETURN NULL;
    END
    $fn$
    """,
    # An update is one row at a time (a resolution): a row trigger, called only when the row
    # leaves or enters pending or, pending, changes its tool (which interlock never does).
    """
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
    $fn$
    """,
    """
    CREATE TRIGGER pending_counts_inserted AFTER INSERT ON interrupts
        REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
        EXECUTE FUNCTION interlock_pending_inserted()
    """,
    """
    CREATE TRIGGER pending_counts_deleted AFTER DELETE ON interrupts
        REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT
        EXECUTE FUNCTION interlock_pending_deleted()
    """,
    """
    CREATE TRIGGER pending_counts_updated AFTER UPDATE OF status, tool ON interrupts
        FOR EACH ROW WHEN ((OLD.status = 'pending') IS DISTINCT FROM (NEW.status = 'pending')
            OR (OLD.status = 'pending' AND OLD.tool IS DISTINCT FROM NEW.tool))
        EXECUTE FUNCTION interlock_pending_updated()
    """,
    """
    CREATE FUNCTION interlock_pending_truncated() RETURNS TRIGGER LANGUAGE plpgsql AS $fn$
    BEGIN
        DELETE FROM pending_count_deltas;
        RETURN NULL;
    END
    $fn$
    """,
    """
    CREATE TRIGGER pending_counts_truncated AFTER TRUNCATE ON interrupts
        FOR EACH STATEMENT EXECUTE FUNCTION interlock_pending_truncated()
    """,
    "INSERT INTO pending_count_deltas (tool, delta) "
    "SELECT tool, count(*) FROM interrupts WHERE status = 'pending' GROUP BY tool",
    # Version 7's index served only the count, which no longer reads the interrupts.
    "DROP INDEX interrupts_pending_tool_count",
)

_V9: Final = (
    # `Store.threads(status="failed")`: the threads whose continuation could not run, or
    # whose node raised, each waiting for a fix and a resume. Few, so an index of their own.
    "CREATE INDEX threads_failed ON threads (thread) WHERE status = 'failed'",
)

MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    _V1,
    _V2,
    _V3,
    _V4,
    _V5,
    _V6,
    _V7,
    _V8,
    _V9,
)
"""``MIGRATIONS[i]`` takes the schema from version ``i`` to ``i + 1``."""

SCHEMA_VERSION: Final = len(MIGRATIONS)
"""The version this code reads and writes."""


class SchemaMismatch(Exception):
    """Raised by `migrate` when the database is not one this code may use."""


def migrate(conn: Connection[Any]) -> list[int]:
    """Bring the database to `SCHEMA_VERSION` in one transaction; safe to run concurrently.

    Returns:
        The versions this call applied (empty when the schema was current).

    Raises:
        SchemaMismatch: The schema was written by a newer interlock, or the tables of another
            application are in the way.
    """
    applied: list[int] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        # Under the lock: whoever got here first has committed its versions already.
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version ("
            "version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
        )
        cur = conn.execute("SELECT coalesce(max(version), 0) FROM schema_version")
        row = cur.fetchone()
        found = 0 if row is None else int(row[0])
        if found > SCHEMA_VERSION:
            raise SchemaMismatch(
                f"schema version {found} was written by a newer interlock (this one knows up "
                f"to {SCHEMA_VERSION}); upgrade interlock to use this database"
            )
        if found == 0:
            cur = conn.execute("SELECT to_regclass('threads') IS NOT NULL")
            row = cur.fetchone()
            if row is not None and row[0]:
                raise SchemaMismatch(
                    "a table 'threads' exists but interlock never migrated this schema; give "
                    "PostgresStore a database or schema of its own (e.g. options=-csearch_path=…)"
                )
        for version, step in enumerate(MIGRATIONS[found:], start=found + 1):
            for statement in step:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_version (version, applied_at) VALUES (%s, %s)",
                (version, time.time()),
            )
            applied.append(version)
    return applied
