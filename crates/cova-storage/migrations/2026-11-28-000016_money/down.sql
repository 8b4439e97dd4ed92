ALTER TABLE batch_items DROP COLUMN known_comments;
ALTER TABLE batches DROP COLUMN max_comments;
ALTER TABLE analyses DROP COLUMN max_comments;
ALTER TABLE jobs DROP COLUMN max_comments;
ALTER TABLE jobs DROP COLUMN free_allowance;
DROP INDEX jobs_waiting_idx;
ALTER TABLE jobs DROP COLUMN waiting_since;
ALTER TABLE jobs DROP COLUMN hold_stage;
CREATE TABLE reservations_before (
    job_id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    month TEXT NOT NULL,
    amount BIGINT NOT NULL CHECK (amount > 0),
    state TEXT NOT NULL CHECK (state IN ('held', 'settled', 'released')),
    charged BIGINT NOT NULL DEFAULT 0 CHECK (charged >= 0 AND charged <= amount),
    created_at BIGINT NOT NULL,
    closed_at BIGINT,
    free_amount BIGINT NOT NULL DEFAULT 0
);
-- A waiting job's empty hold has no place in the older table: it is given up.
INSERT INTO reservations_before (job_id, account_id, month, amount, state, charged, created_at, closed_at, free_amount)
    SELECT job_id, account_id, month, amount, state, charged, created_at, closed_at, free_amount
    FROM reservations WHERE amount > 0;
DROP TABLE reservations;
ALTER TABLE reservations_before RENAME TO reservations;
