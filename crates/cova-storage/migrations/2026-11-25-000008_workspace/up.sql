-- The workspace: passwords, cookie sessions, e-mailed links and packs bought from the payment
-- provider. Accounts made by `cova admin` have no password until a reset sets one.
ALTER TABLE accounts ADD COLUMN password_hash TEXT;

-- A browser session. `id` is stable for the session's life (jobs name it); the cookie's value
-- is rotated at login and privilege changes, so only its SHA-256 is kept, in `secret_hash`.
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    secret_hash TEXT NOT NULL UNIQUE,
    csrf_token TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    last_seen_at BIGINT NOT NULL,
    -- Idle and absolute ends; whichever comes first ends the session.
    idle_expires_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    revoked_at BIGINT
);
CREATE INDEX sessions_account_idx ON sessions (account_id);

-- Single-use links sent by e-mail (confirm the address, reset the password), kept hashed.
CREATE TABLE email_links (
    token_hash TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    purpose TEXT NOT NULL CHECK (purpose IN ('confirm', 'reset')),
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at BIGINT
);
CREATE INDEX email_links_account_idx ON email_links (account_id, purpose);

-- A checkout opened with the payment provider; `paid_at` is set once, by the first webhook
-- that reports it paid, in the same transaction as the grant: a pack is granted once per checkout.
CREATE TABLE purchases (
    checkout_id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    pack TEXT NOT NULL,
    comments BIGINT NOT NULL CHECK (comments > 0),
    amount BIGINT NOT NULL,
    currency TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    paid_at BIGINT,
    event_id TEXT
);
CREATE INDEX purchases_account_idx ON purchases (account_id, created_at);

-- The session that started a job (session jobs spend the free allowance and are not saved to
-- the library by themselves); NULL for tokens and watches.
ALTER TABLE jobs ADD COLUMN session_id TEXT;
CREATE INDEX jobs_session_idx ON jobs (session_id, created_at);

-- The part of a hold taken from the account's free allowance rather than the month's packs.
ALTER TABLE reservations ADD COLUMN free_amount BIGINT NOT NULL DEFAULT 0;
