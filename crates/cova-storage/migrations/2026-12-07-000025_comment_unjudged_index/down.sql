DROP INDEX job_comments_unjudged_idx;
