DROP INDEX job_comments_posted_idx;
CREATE INDEX job_comments_posted_idx ON job_comments (job_id, comments_day, posted_at DESC, position, sentiment);
