-- The account's analyses: one per (account, ref), from its first completed scrape (or a
-- metadata-only save). `saved_at` set = bookmarked in the library; the breakdown is the
-- comments of `last_job_id`, kept 14 days after the last full scrape (`expires_at`).
CREATE TABLE analyses (
    id TEXT NOT NULL UNIQUE,
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    ref TEXT NOT NULL,
    url TEXT NOT NULL,
    platform TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ready', 'expired', 'metadata_only')),
    -- The post's metadata as last read (JSON), and a lower-cased title/author text for search.
    metadata TEXT,
    search TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    saved_at BIGINT,
    last_scraped_at BIGINT,
    expires_at BIGINT,
    last_job_id TEXT,
    comment_count BIGINT NOT NULL DEFAULT 0,
    top_level_count BIGINT NOT NULL DEFAULT 0,
    new_count BIGINT NOT NULL DEFAULT 0,
    watch_enabled BOOLEAN NOT NULL DEFAULT FALSE,
    watch_interval_min INTEGER NOT NULL DEFAULT 360 CHECK (watch_interval_min BETWEEN 30 AND 10080),
    watch_next_run_at BIGINT,
    watch_last_run_at BIGINT,
    watch_last_error TEXT,
    -- A scheduler replica handling this watch keeps others off it until then.
    watch_claimed_until BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (account_id, ref)
);
INSERT INTO analyses (id, account_id, ref, url, platform, status, created_at, saved_at, last_scraped_at, expires_at,
                      last_job_id, comment_count)
    SELECT account_id || '/' || ref, account_id, ref, url, platform, 'ready', saved_at, saved_at, last_scraped_at,
           last_scraped_at + 1209600000, last_job_id, comment_count
    FROM library;
DROP TABLE library;
CREATE INDEX analyses_saved_idx ON analyses (account_id, saved_at);
CREATE INDEX analyses_due_idx ON analyses (watch_next_run_at) WHERE watch_enabled;
CREATE INDEX analyses_expiry_idx ON analyses (expires_at) WHERE status = 'ready';

-- What the breakdown shows and searches without parsing every stored comment.
ALTER TABLE job_comments ADD COLUMN likes BIGINT NOT NULL DEFAULT 0;
-- When the comment was posted (unix ms; 0 when the platform did not say).
ALTER TABLE job_comments ADD COLUMN posted_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE job_comments ADD COLUMN search TEXT NOT NULL DEFAULT '';
-- When this comment was first collected for the analysis (kept across re-scrapes). Comments
-- stored before were first seen when their job finished, so a re-scrape charges only new ones.
ALTER TABLE job_comments ADD COLUMN first_seen_at BIGINT;
UPDATE job_comments SET first_seen_at = (SELECT finished_at FROM jobs WHERE jobs.id = job_comments.job_id);
