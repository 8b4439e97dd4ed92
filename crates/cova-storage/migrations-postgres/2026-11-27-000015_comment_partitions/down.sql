CREATE TABLE job_comments_plain (
    job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    comment_id TEXT NOT NULL,
    parent_id TEXT,
    position BIGINT NOT NULL,
    body TEXT NOT NULL,
    likes BIGINT NOT NULL DEFAULT 0,
    posted_at BIGINT NOT NULL DEFAULT 0,
    search TEXT NOT NULL DEFAULT '',
    first_seen_at BIGINT,
    thread BIGINT,
    comments_day BIGINT NOT NULL DEFAULT 0
);
INSERT INTO job_comments_plain SELECT job_id, comment_id, parent_id, position, body, likes, posted_at, search,
    first_seen_at, thread, comments_day FROM job_comments;
DROP TABLE job_comments;
ALTER TABLE job_comments_plain RENAME TO job_comments;
ALTER TABLE job_comments ADD PRIMARY KEY (job_id, comment_id);
CREATE INDEX job_comments_position_idx ON job_comments (job_id, parent_id, position);
CREATE INDEX job_comments_thread_idx ON job_comments (job_id, thread, position);
DROP FUNCTION cova_comments_day(BIGINT);
