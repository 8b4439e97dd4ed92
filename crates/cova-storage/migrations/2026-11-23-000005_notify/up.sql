-- Keyword lists, notification channels, keyword alerts and the delivery log.

CREATE TABLE keywords (
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    -- The keyword as the customer wrote it (trimmed), its place in the list, and its
    -- normalised form, which makes duplicates one keyword.
    keyword TEXT NOT NULL,
    normalized TEXT NOT NULL,
    position INTEGER NOT NULL,
    PRIMARY KEY (account_id, normalized)
);

CREATE TABLE channels (
    account_id TEXT PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
    telegram_chat_id TEXT,
    telegram_enabled BOOLEAN NOT NULL DEFAULT FALSE,
    telegram_disabled_reason TEXT,
    webhook_url TEXT,
    webhook_enabled BOOLEAN NOT NULL DEFAULT FALSE,
    webhook_job_events BOOLEAN NOT NULL DEFAULT FALSE,
    -- Needed in clear to sign; shown to the customer once.
    webhook_secret TEXT,
    webhook_disabled_reason TEXT,
    updated_at BIGINT NOT NULL
);

-- Alerts are numbered per account in commit order (the account row is locked while one is
-- numbered), so a poller that asks for those after the last number it saw misses none.
ALTER TABLE accounts ADD COLUMN alert_seq BIGINT NOT NULL DEFAULT 0;
CREATE TABLE keyword_alerts (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    keyword TEXT NOT NULL,
    ref TEXT NOT NULL,
    comment_id TEXT NOT NULL,
    -- {id, text, author} of the comment (JSON).
    comment TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (account_id, ref, comment_id, keyword),
    UNIQUE (account_id, seq)
);

-- One row per event and channel: at-least-once delivery with backoff, and the log customers read.
CREATE TABLE deliveries (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    event_id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    channel TEXT NOT NULL CHECK (channel IN ('telegram', 'webhook')),
    payload TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL,
    claimed_until BIGINT NOT NULL DEFAULT 0,
    last_status INTEGER,
    last_error TEXT,
    delivered_at BIGINT,
    created_at BIGINT NOT NULL,
    UNIQUE (event_id, channel)
);
CREATE INDEX deliveries_due_idx ON deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX deliveries_account_idx ON deliveries (account_id, created_at);
