DROP INDEX job_comments_terms_idx;
