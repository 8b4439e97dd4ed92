-- AI jobs: quotes, the jobs' inputs and results, consents, and watch phrases.

-- A quote binds (account, ref, task set, comment count) to a charge for 15 minutes; it starts
-- at most one job.
CREATE TABLE ai_quotes (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    ref TEXT NOT NULL,
    -- The scrape whose comments were quoted: a newer scrape makes the quote stale.
    source_job_id TEXT NOT NULL,
    tasks TEXT NOT NULL,
    comments BIGINT NOT NULL,
    charge BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    job_id TEXT
);
CREATE INDEX ai_quotes_account_idx ON ai_quotes (account_id, created_at);

-- What an AI job (a `jobs` row of kind `ai`) analyses, and its result.
CREATE TABLE ai_jobs (
    job_id TEXT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    quote_id TEXT NOT NULL,
    source_job_id TEXT NOT NULL,
    tasks TEXT NOT NULL,
    -- At most this many comments are analysed (and sent to a model): the quoted count.
    comments BIGINT NOT NULL,
    charge BIGINT NOT NULL,
    model TEXT,
    tokens_used BIGINT,
    -- The result (JSON) once complete.
    result TEXT
);

-- Calling an AI endpoint with a token is consent to send comment texts to the model.
CREATE TABLE ai_consents (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    token_id TEXT,
    ref TEXT NOT NULL,
    job_id TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX ai_consents_account_idx ON ai_consents (account_id, created_at);

-- Up to three watch phrases per analysis (a JSON array).
CREATE TABLE ai_queries (
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    ref TEXT NOT NULL,
    queries TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, ref)
);
