DROP INDEX jobs_comments_day_idx;
DROP INDEX analyses_comments_day_idx;
ALTER TABLE job_comments DROP COLUMN comments_day;
ALTER TABLE analyses DROP COLUMN comments_day;
ALTER TABLE jobs DROP COLUMN comments_day;
