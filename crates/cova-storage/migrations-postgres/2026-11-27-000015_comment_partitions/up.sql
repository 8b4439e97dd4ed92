-- PostgreSQL only: the comments are partitioned by `comments_day`, the UTC day their scrape
-- attempt started. A day expires as a partition dropped whole (`repo::comment_days`) instead of
-- row deletes that leave the table to bloat; SQLite keeps its plain table.

-- Makes the partition of one day if it is missing. It is made alone and then attached: attaching
-- locks the parent only against other schema changes, so writers of the other days go on.
CREATE FUNCTION cova_comments_day(day BIGINT) RETURNS VOID LANGUAGE plpgsql AS $$
DECLARE
    part TEXT := 'job_comments_d' || day;
BEGIN
    IF to_regclass(part) IS NOT NULL THEN
        RETURN;
    END IF;
    EXECUTE format('CREATE TABLE %I (LIKE job_comments INCLUDING DEFAULTS)', part);
    EXECUTE format('ALTER TABLE job_comments ATTACH PARTITION %I FOR VALUES FROM (%s) TO (%s)', part, day, day + 1);
EXCEPTION WHEN duplicate_table OR unique_violation THEN
    -- Another process made it at the same moment.
    NULL;
END $$;

ALTER TABLE job_comments RENAME TO job_comments_plain;
ALTER TABLE job_comments_plain DROP CONSTRAINT job_comments_pkey;
DROP INDEX job_comments_position_idx;
DROP INDEX job_comments_thread_idx;

CREATE TABLE job_comments (
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
    -- No default: a row without its day has no partition and is refused.
    comments_day BIGINT NOT NULL,
    PRIMARY KEY (job_id, comment_id, comments_day)
) PARTITION BY RANGE (comments_day);
CREATE INDEX job_comments_position_idx ON job_comments (job_id, parent_id, position);
CREATE INDEX job_comments_thread_idx ON job_comments (job_id, thread, position);

-- The days already stored; the next ones are made by the janitor ahead of time and, should it
-- not have run, by the first scrape of the day.
SELECT cova_comments_day(day) FROM (SELECT DISTINCT comments_day AS day FROM job_comments_plain) days;
INSERT INTO job_comments (job_id, comment_id, parent_id, position, body, likes, posted_at, search,
                          first_seen_at, thread, comments_day)
    SELECT job_id, comment_id, parent_id, position, body, likes, posted_at, search, first_seen_at, thread,
           comments_day
    FROM job_comments_plain;
DROP TABLE job_comments_plain;
