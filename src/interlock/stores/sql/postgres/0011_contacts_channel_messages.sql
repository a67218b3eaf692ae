-- Version 11 of PostgresStore's schema: the contact addresses of principals, and the messages
-- channels posted about interrupts.
-- Released: never edit a statement here (see interlock.stores._postgres_schema).

-- principals_email --
-- A principal's e-mail address as given (NULL: none); email_key is it in lower case, what
-- addresses are compared by.
ALTER TABLE principals ADD COLUMN email TEXT;

-- principals_email_key --
ALTER TABLE principals ADD COLUMN email_key TEXT;

-- principals_slack_user --
-- A principal's Slack user id (NULL: none).
ALTER TABLE principals ADD COLUMN slack_user TEXT;

-- principals_email_unique --
-- One principal per address. The store looks the holder up first to say who has it (writes
-- of identities run one at a time); the index is what holds even if that were skipped.
CREATE UNIQUE INDEX principals_email_unique ON principals (email_key);

-- principals_slack_user_unique --
CREATE UNIQUE INDEX principals_slack_user_unique ON principals (slack_user);

-- channel_messages --
-- The message a channel (such as "slack #approvals") posted about an interrupt. The row is
-- inserted when a process claims the posting (INSERT ... ON CONFLICT DO NOTHING: one claimer
-- of all the processes), then the posted message's handle (ref) and what it shows (state)
-- are recorded, so any process can update the message later. Deleted with its thread.
CREATE TABLE channel_messages (
    channel      TEXT NOT NULL,
    interrupt_id TEXT NOT NULL,
    thread       TEXT NOT NULL,
    ref          TEXT,
    state        TEXT NOT NULL,
    claimed_at   DOUBLE PRECISION NOT NULL,
    updated_at   DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (channel, interrupt_id)
);

-- channel_messages_thread --
CREATE INDEX channel_messages_thread ON channel_messages (thread);
