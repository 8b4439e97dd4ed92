-- Where a running job stands with the balance (cova_domain::money::Stage): `opening` until its
-- post's size is read, `sized` once its hold is set, `waiting` while it waits for the account's
-- other jobs to give comments back. Jobs queued before this version have not been sized yet.
ALTER TABLE jobs ADD COLUMN hold_stage TEXT NOT NULL DEFAULT 'sized';
UPDATE jobs SET hold_stage = 'opening' WHERE status = 'queued' AND kind = 'analyze';
-- When a waiting job was last looked at (the scheduler wakes one nothing else will).
ALTER TABLE jobs ADD COLUMN waiting_since BIGINT;
CREATE INDEX jobs_waiting_idx ON jobs (waiting_since) WHERE hold_stage = 'waiting';
-- A job that waits for the balance holds nothing meanwhile: a held reservation may be of 0
-- comments. (Rebuilt, since SQLite cannot change a CHECK constraint in place.)
CREATE TABLE reservations_next (
    job_id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    month TEXT NOT NULL,
    amount BIGINT NOT NULL CHECK (amount >= 0),
    state TEXT NOT NULL CHECK (state IN ('held', 'settled', 'released')),
    charged BIGINT NOT NULL DEFAULT 0 CHECK (charged >= 0 AND charged <= amount),
    created_at BIGINT NOT NULL,
    closed_at BIGINT,
    free_amount BIGINT NOT NULL DEFAULT 0 CHECK (free_amount >= 0 AND free_amount <= amount)
);
INSERT INTO reservations_next (job_id, account_id, month, amount, state, charged, created_at, closed_at, free_amount)
    SELECT job_id, account_id, month, amount, state, charged, created_at, closed_at, free_amount FROM reservations;
DROP TABLE reservations;
ALTER TABLE reservations_next RENAME TO reservations;
-- A session's new analysis may spend the free allowance (before packs), also when it is sized
-- again after waiting with nothing held.
ALTER TABLE jobs ADD COLUMN free_allowance BOOLEAN NOT NULL DEFAULT FALSE;
UPDATE jobs SET free_allowance = TRUE
    WHERE id IN (SELECT job_id FROM reservations WHERE state = 'held' AND free_amount > 0);
-- The customer's cap on the comments collected for a post: per job, per batch, and the last
-- scrape's on the analysis (a re-scrape takes it unless asked otherwise).
ALTER TABLE jobs ADD COLUMN max_comments BIGINT;
ALTER TABLE analyses ADD COLUMN max_comments BIGINT;
ALTER TABLE batches ADD COLUMN max_comments BIGINT;
-- A batch item's comment count when it was known at creation (a preview, a creator listing).
ALTER TABLE batch_items ADD COLUMN known_comments BIGINT;
