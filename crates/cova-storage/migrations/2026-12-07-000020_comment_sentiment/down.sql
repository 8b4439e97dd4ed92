ALTER TABLE job_comments DROP COLUMN sentiment;
