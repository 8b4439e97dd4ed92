-- Spike alerts: an account's settings (subject '') and, where set, one post's or one
-- creator's (subject is its ref); the alerts raised, numbered with the keyword alerts.
CREATE TABLE spike_settings (
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    subject TEXT NOT NULL,
    enabled BOOLEAN NOT NULL,
    sensitivity TEXT NOT NULL,
    min_comments BIGINT,
    cooldown_min BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, subject)
);

CREATE TABLE spike_alerts (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    kind TEXT NOT NULL,
    ref TEXT NOT NULL,
    window_start BIGINT NOT NULL,
    window_end BIGINT NOT NULL,
    -- The alert as announced (the `spike.alert` event, JSON).
    body TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (account_id, seq)
);
CREATE INDEX spike_alerts_last_idx ON spike_alerts (account_id, ref, kind, window_end);
