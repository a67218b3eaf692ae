-- Version 5 of PostgresStore's schema: digests of each row's columns, checked on every read
-- (see interlock.stores._rows, whose encoding interlock_field reproduces). The client
-- computes the digests of what it writes; only the lease an append takes is decided here, so
-- its digest is computed here.
-- Released: never edit a statement here (see interlock.stores._postgres_schema).

-- add_thread_digests --
ALTER TABLE threads ADD COLUMN digest BYTEA, ADD COLUMN lease_digest BYTEA;

-- add_checkpoint_digest --
ALTER TABLE checkpoints ADD COLUMN digest BYTEA;

-- add_interrupt_digest --
ALTER TABLE interrupts ADD COLUMN digest BYTEA;

-- interlock_field_text --
-- msgspec's msgpack encoding of one value of each column type (the smallest form of an
-- integer, float64 for a real), and the digest of an array of n of them.
CREATE FUNCTION interlock_field(v TEXT) RETURNS BYTEA IMMUTABLE LANGUAGE SQL AS $$
    SELECT CASE
        WHEN v IS NULL THEN '\xc0'::BYTEA
        WHEN octet_length(v) < 32
            THEN set_byte('\x00'::BYTEA, 0, 160 + octet_length(v)) || convert_to(v, 'UTF8')
        WHEN octet_length(v) < 256 THEN '\xd9'::BYTEA
            || substring(int4send(octet_length(v)) FROM 4) || convert_to(v, 'UTF8')
        WHEN octet_length(v) < 65536 THEN '\xda'::BYTEA
            || substring(int4send(octet_length(v)) FROM 3) || convert_to(v, 'UTF8')
        ELSE '\xdb'::BYTEA || int4send(octet_length(v)) || convert_to(v, 'UTF8')
    END
$$;

-- interlock_field_bigint --
CREATE FUNCTION interlock_field(v BIGINT) RETURNS BYTEA IMMUTABLE LANGUAGE SQL AS $$
    SELECT CASE
        WHEN v IS NULL THEN '\xc0'::BYTEA
        WHEN v >= 0 AND v < 128 THEN substring(int8send(v) FROM 8)
        WHEN v >= 0 AND v < 256 THEN '\xcc'::BYTEA || substring(int8send(v) FROM 8)
        WHEN v >= 0 AND v < 65536 THEN '\xcd'::BYTEA || substring(int8send(v) FROM 7)
        WHEN v >= 0 AND v < 4294967296 THEN '\xce'::BYTEA || substring(int8send(v) FROM 5)
        WHEN v >= 0 THEN '\xcf'::BYTEA || int8send(v)
        WHEN v >= -32 THEN substring(int8send(v) FROM 8)
        WHEN v >= -128 THEN '\xd0'::BYTEA || substring(int8send(v) FROM 8)
        WHEN v >= -32768 THEN '\xd1'::BYTEA || substring(int8send(v) FROM 7)
        WHEN v >= -2147483648 THEN '\xd2'::BYTEA || substring(int8send(v) FROM 5)
        ELSE '\xd3'::BYTEA || int8send(v)
    END
$$;

-- interlock_field_double --
CREATE FUNCTION interlock_field(v DOUBLE PRECISION) RETURNS BYTEA IMMUTABLE LANGUAGE SQL
AS $$
    SELECT CASE WHEN v IS NULL THEN '\xc0'::BYTEA ELSE '\xcb'::BYTEA || float8send(v) END
$$;

-- interlock_field_bytea --
CREATE FUNCTION interlock_field(v BYTEA) RETURNS BYTEA IMMUTABLE LANGUAGE SQL AS $$
    SELECT CASE
        WHEN v IS NULL THEN '\xc0'::BYTEA
        WHEN length(v) < 256 THEN '\xc4'::BYTEA || substring(int4send(length(v)) FROM 4) || v
        WHEN length(v) < 65536
            THEN '\xc5'::BYTEA || substring(int4send(length(v)) FROM 3) || v
        ELSE '\xc6'::BYTEA || int4send(length(v)) || v
    END
$$;

-- interlock_digest --
-- The digest of n fields (n < 16: a msgpack fixarray).
CREATE FUNCTION interlock_digest(n INTEGER, fields BYTEA) RETURNS BYTEA IMMUTABLE
LANGUAGE SQL AS $$
    SELECT substring(sha256(set_byte('\x00'::BYTEA, 0, 144 + n) || fields) FROM 1 FOR 8)
$$;

-- digest_threads --
UPDATE threads SET
    digest = interlock_digest(5, interlock_field(thread) || interlock_field(head_id)
        || interlock_field(head_seq) || interlock_field(status)
        || interlock_field(updated_at)),
    lease_digest = interlock_digest(4, interlock_field(thread) || interlock_field(lease_owner)
        || interlock_field(lease_token) || interlock_field(lease_expires));

-- digest_checkpoints --
UPDATE checkpoints SET digest = interlock_digest(10, interlock_field(thread)
    || interlock_field(seq) || interlock_field(id) || interlock_field(parent_id)
    || interlock_field(step) || interlock_field(base_seq) || interlock_field(created_at)
    || interlock_field(source) || interlock_field(status) || interlock_field(body));

-- digest_interrupts --
UPDATE interrupts SET digest = interlock_digest(13, interlock_field(id)
    || interlock_field(thread) || interlock_field(checkpoint_id) || interlock_field(key)
    || interlock_field(address) || interlock_field(kind) || interlock_field(status)
    || interlock_field(created_at) || interlock_field(deadline) || interlock_field(body)
    || interlock_field(resolved_at) || interlock_field(resolution) || interlock_field(tool));

-- drop_interlock_append --
-- The append of version 4, now writing and checking the digests.
DROP FUNCTION interlock_append;

-- interlock_append --
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
$fn$;
