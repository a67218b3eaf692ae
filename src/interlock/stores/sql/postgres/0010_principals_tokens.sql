-- Version 10 of PostgresStore's schema: the approval server's principals and their tokens.
-- Released: never edit a statement here (see interlock.stores._postgres_schema).

-- principals --
-- A person or service the server knows. name_key is the name in normal form (NFKC,
-- case-folded: interlock._principals.principal_key), so one name has one row however it is
-- typed. group_names is a JSON array of the names as given. rev: see identity_revision.
CREATE TABLE principals (
    name_key     TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    display_name TEXT NOT NULL,
    role         TEXT NOT NULL,
    group_names  TEXT NOT NULL,
    disabled     BOOLEAN NOT NULL,
    created_at   DOUBLE PRECISION NOT NULL,
    rev          BIGINT NOT NULL
);

-- principals_rev --
CREATE INDEX principals_rev ON principals (rev);

-- tokens --
-- A token of a principal: its hash only (sha256:<hex>), never the token. role is the most it
-- may do (NULL: its principal's role); tools and threads are JSON arrays of its scopes.
-- Revoked tokens stay, so that a revocation reaches every follower as a change.
CREATE TABLE tokens (
    id           TEXT PRIMARY KEY,
    hash         TEXT NOT NULL UNIQUE,
    principal    TEXT NOT NULL REFERENCES principals (name_key),
    role         TEXT,
    tools        TEXT NOT NULL,
    threads      TEXT NOT NULL,
    created_at   DOUBLE PRECISION NOT NULL,
    expires_at   DOUBLE PRECISION,
    revoked_at   DOUBLE PRECISION,
    last_used_at DOUBLE PRECISION,
    rev          BIGINT NOT NULL
);

-- tokens_rev --
CREATE INDEX tokens_rev ON tokens (rev);

-- tokens_principal --
CREATE INDEX tokens_principal ON tokens (principal, id);

-- identity_revision --
-- One row: the last identity revision given out. Every write of a principal or a token first
-- adds one to it, which locks the row until the transaction ends: identity writes run one at
-- a time, revisions go up in commit order, and a follower that reads revision n and then the
-- rows up to it sees every change up to n (a sequence would not do: its numbers are not given
-- out in commit order). Store.identity_changes.
CREATE TABLE identity_revision (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    rev BIGINT NOT NULL
);

-- first_identity_revision --
INSERT INTO identity_revision (id, rev) VALUES (1, 0);
