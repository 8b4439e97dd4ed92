DROP INDEX job_comments_thread_idx;
ALTER TABLE job_comments DROP COLUMN thread;
