-- Comment collection: collected comments per job, the library, and the transactional outbox.

-- One row per collected comment (top-level or reply), in platform order.
CREATE TABLE job_comments (
    job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    comment_id TEXT NOT NULL,
    parent_id TEXT,
    position BIGINT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (job_id, comment_id)
);
CREATE INDEX job_comments_position_idx ON job_comments (job_id, parent_id, position);

-- Saved posts per account (bookmarks); one entry per ref.
CREATE TABLE library (
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    ref TEXT NOT NULL,
    url TEXT NOT NULL,
    platform TEXT NOT NULL,
    saved_at BIGINT NOT NULL,
    last_scraped_at BIGINT,
    last_job_id TEXT,
    comment_count BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (account_id, ref)
);

-- Messages written in the same transaction as the state they announce; a relay publishes them.
CREATE TABLE outbox (
    id TEXT PRIMARY KEY,
    destination TEXT NOT NULL CHECK (destination IN ('command', 'event')),
    routing_key TEXT NOT NULL,
    payload TEXT NOT NULL,
    headers TEXT NOT NULL DEFAULT '{}',
    created_at BIGINT NOT NULL,
    sent_at BIGINT
);
CREATE INDEX outbox_pending_idx ON outbox (sent_at, created_at);

-- Which worker holds a job; a lease that is not renewed expires, so a crashed worker's job is
-- taken over, and two deliveries of one command never collect at the same time.
CREATE TABLE job_leases (
    job_id TEXT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    owner TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
