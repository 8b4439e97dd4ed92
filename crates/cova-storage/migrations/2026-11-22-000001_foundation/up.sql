-- Times are unix milliseconds (BIGINT) so the same schema reads alike on PostgreSQL and SQLite.

CREATE TABLE accounts (
    id TEXT PRIMARY KEY,
    email TEXT NOT NULL UNIQUE,
    email_confirmed_at BIGINT,
    -- Counter kept beside the token rows so the 5-token cap is one conditional update.
    active_tokens INTEGER NOT NULL DEFAULT 0 CHECK (active_tokens >= 0 AND active_tokens <= 5),
    free_comments_left BIGINT NOT NULL DEFAULT 0 CHECK (free_comments_left >= 0),
    created_at BIGINT NOT NULL
);

CREATE TABLE api_tokens (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    prefix TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    scopes TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    last_used_at BIGINT,
    revoked_at BIGINT
);
CREATE INDEX api_tokens_account_idx ON api_tokens (account_id);

-- One row per account and calendar month (UTC, 'YYYY-MM'); what is left expires with the month.
CREATE TABLE balances (
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    month TEXT NOT NULL,
    granted BIGINT NOT NULL DEFAULT 0,
    reserved BIGINT NOT NULL DEFAULT 0,
    spent BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (account_id, month),
    CONSTRAINT balances_never_overdrawn CHECK (
        granted >= 0 AND reserved >= 0 AND spent >= 0 AND reserved + spent <= granted
    )
);

-- Holds on a balance, keyed by job so that settle and release each happen at most once.
CREATE TABLE reservations (
    job_id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    month TEXT NOT NULL,
    amount BIGINT NOT NULL CHECK (amount > 0),
    state TEXT NOT NULL CHECK (state IN ('held', 'settled', 'released')),
    charged BIGINT NOT NULL DEFAULT 0 CHECK (charged >= 0 AND charged <= amount),
    created_at BIGINT NOT NULL,
    closed_at BIGINT
);

CREATE TABLE ledger (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    month TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('grant', 'charge')),
    amount BIGINT NOT NULL,
    job_id TEXT,
    note TEXT,
    created_at BIGINT NOT NULL
);
CREATE INDEX ledger_account_month_idx ON ledger (account_id, month);

CREATE TABLE jobs (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    token_id TEXT,
    kind TEXT NOT NULL,
    ref TEXT NOT NULL,
    url TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('queued', 'in_progress', 'complete', 'failed')),
    idempotency_key TEXT,
    created_at BIGINT NOT NULL,
    started_at BIGINT,
    finished_at BIGINT,
    comments_collected BIGINT NOT NULL DEFAULT 0,
    comments_expected BIGINT,
    truncated BOOLEAN NOT NULL DEFAULT FALSE,
    error_code TEXT,
    error_detail TEXT
);
CREATE INDEX jobs_account_status_idx ON jobs (account_id, status);
CREATE INDEX jobs_account_ref_idx ON jobs (account_id, ref, created_at);
CREATE UNIQUE INDEX jobs_idempotency_idx ON jobs (account_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
