-- The one schema for PostgreSQL and SQLite: portable SQL only (both run this file).

-- Idempotency keys, remembered with every answer that returned a job: a new job, a repeat,
-- or a deduplicated one (so the same key never creates a second job within 24 hours).
CREATE TABLE idempotency_keys (
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    ref TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, key)
);
INSERT INTO idempotency_keys (account_id, key, job_id, ref, created_at)
    SELECT account_id, idempotency_key, id, ref, created_at FROM jobs WHERE idempotency_key IS NOT NULL;
DROP INDEX jobs_idempotency_idx;
ALTER TABLE jobs DROP COLUMN idempotency_key;

-- Outbox rows are claimed by one relay at a time (several replicas share the table), retried
-- with backoff, and parked after repeated failures so that one bad row never blocks the rest.
ALTER TABLE outbox ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE outbox ADD COLUMN last_error TEXT;
ALTER TABLE outbox ADD COLUMN next_attempt_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE outbox ADD COLUMN claimed_until BIGINT NOT NULL DEFAULT 0;
ALTER TABLE outbox ADD COLUMN parked_at BIGINT;
DROP INDEX outbox_pending_idx;
CREATE INDEX outbox_due_idx ON outbox (next_attempt_at, created_at) WHERE sent_at IS NULL AND parked_at IS NULL;
CREATE INDEX outbox_sent_idx ON outbox (sent_at) WHERE sent_at IS NOT NULL;
