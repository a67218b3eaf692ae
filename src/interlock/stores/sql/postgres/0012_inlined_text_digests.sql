-- Version 12 of PostgresStore's schema: interlock_field of a TEXT is inlined where it is used.
-- Released: never edit a statement here (see interlock.stores._postgres_schema).

-- interlock_field_text_stable --
-- Version 5 declared this function IMMUTABLE, but its body calls convert_to, which is STABLE
-- (it depends on the database's encoding). PostgreSQL inlines a SQL function only when its
-- body is no more volatile than the function claims to be, so it never inlined this one: each
-- call ran as a function of its own, whose body was parsed and planned again in every
-- transaction. interlock_append calls it 7 times per append (the head's and the lease's
-- digests) and 16 more per resolution, which made it most of the server's time in an append
-- (0.32 ms of an append's 0.57 ms on average over an S2 round trip; a resolution's UPDATE
-- took 0.76 ms, 0.14 ms inlined). Declared STABLE, as its body is, it is inlined into each
-- caller's cached plan. The body and so every digest stay exactly as they were.
CREATE OR REPLACE FUNCTION interlock_field(v TEXT) RETURNS BYTEA STABLE LANGUAGE SQL AS $$
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
