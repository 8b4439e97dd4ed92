DROP INDEX job_comments_posted_idx;
