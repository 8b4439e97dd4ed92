-- Many posts at once: a batch of post URLs, each becoming an analyze job when the account has
-- a free slot (at most three running), paid when it starts.
CREATE TABLE batches (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    token_id TEXT,
    session_id TEXT,
    -- The Idempotency-Key of the request, and a digest of its URL list: the same key with
    -- another list is a conflict.
    idempotency_key TEXT,
    request_digest TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    cancelled_at BIGINT,
    -- When its last item ended (the `batch.complete` event was written then).
    finished_at BIGINT
);
CREATE UNIQUE INDEX batches_key_idx ON batches (account_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX batches_account_idx ON batches (account_id, created_at);

-- One URL of a batch: `waiting` for a slot, `started` (its job), `refused` (its error), or
-- `cancelled` before it started.
CREATE TABLE batch_items (
    batch_id TEXT NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    account_id TEXT NOT NULL,
    url TEXT NOT NULL,
    ref TEXT,
    state TEXT NOT NULL CHECK (state IN ('waiting', 'started', 'refused', 'cancelled')),
    job_id TEXT,
    deduplicated TEXT,
    error_code TEXT,
    error_detail TEXT,
    queued_at BIGINT NOT NULL,
    PRIMARY KEY (batch_id, position)
);
CREATE INDEX batch_items_waiting_idx ON batch_items (account_id, state, queued_at, position);
CREATE INDEX batch_items_job_idx ON batch_items (job_id);
CREATE INDEX batches_open_idx ON batches (created_at) WHERE finished_at IS NULL;

-- The history of jobs: newest first per account, by batch; what a scrape added (for the
-- chart of new comments per refresh) and why a collection stopped short.
ALTER TABLE jobs ADD COLUMN batch_id TEXT;
ALTER TABLE jobs ADD COLUMN comments_new BIGINT;
ALTER TABLE jobs ADD COLUMN truncated_reason TEXT;
CREATE INDEX jobs_account_created_idx ON jobs (account_id, created_at, id);
CREATE INDEX jobs_batch_idx ON jobs (batch_id);
