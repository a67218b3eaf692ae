-- Version 4 of PostgresStore's schema: a whole append_checkpoint in one function call.
-- Released: never edit a statement here (see interlock.stores._postgres_schema). Version 5
-- replaces the function; its text stays here, as databases were migrated by it.

-- interlock_append --
-- A whole append_checkpoint in one statement, hence one round trip: lock the thread's row,
-- check the lease (as `lease_after`) and the head (as `head_mismatch`), move both, resolve,
-- insert, and chain the audit entries. A refusal raises SQLSTATE IL001 with a JSON message
-- that the client turns into the typed error; raising rolls back whatever was written.
-- Audit hashes are SHA-256 over prev || msgpack([thread, seq, at, kind, actor, data]): the
-- client sends the encoding before seq (a_prefix) and after it (a_suffix), and only seq,
-- known under the row lock, is encoded here, the way msgspec encodes a positive integer.
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
$fn$;
