ALTER TABLE job_comments DROP COLUMN first_seen_at;
ALTER TABLE job_comments DROP COLUMN search;
ALTER TABLE job_comments DROP COLUMN posted_at;
ALTER TABLE job_comments DROP COLUMN likes;
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
INSERT INTO library (account_id, ref, url, platform, saved_at, last_scraped_at, last_job_id, comment_count)
    SELECT account_id, ref, url, platform, saved_at, last_scraped_at, last_job_id, comment_count
    FROM analyses WHERE saved_at IS NOT NULL;
DROP TABLE analyses;
