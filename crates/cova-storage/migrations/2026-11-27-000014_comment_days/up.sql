-- The UTC day (days since the epoch) on which a scrape attempt started. Its comments are stored
-- under that day, so that on PostgreSQL a day's comments are one partition, dropped whole once no
-- analysis and no running job uses it (see migrations-postgres). SQLite keeps one plain table.
ALTER TABLE jobs ADD COLUMN comments_day BIGINT;
ALTER TABLE analyses ADD COLUMN comments_day BIGINT;
ALTER TABLE job_comments ADD COLUMN comments_day BIGINT NOT NULL DEFAULT 0;
UPDATE jobs SET comments_day = started_at / 86400000 WHERE started_at IS NOT NULL AND kind = 'analyze';
UPDATE job_comments SET comments_day = COALESCE(
    (SELECT jobs.comments_day FROM jobs WHERE jobs.id = job_comments.job_id), 0);
UPDATE analyses SET comments_day = (SELECT jobs.comments_day FROM jobs WHERE jobs.id = analyses.last_job_id)
    WHERE last_job_id IS NOT NULL;
-- Whether a day is still used: one probe each for the breakdowns and the running jobs.
CREATE INDEX analyses_comments_day_idx ON analyses (comments_day) WHERE last_job_id IS NOT NULL;
CREATE INDEX jobs_comments_day_idx ON jobs (comments_day) WHERE status IN ('queued', 'in_progress');
