-- The comments of a scrape whose sentiment is not stored yet, in collection order: what each
-- spike check (and an AI job) asks first. Without it the question read every stored row of the
-- post to find none, so a check's cost grew with the post's history; with it, it reads the new
-- comments alone. Judged rows leave the index.
CREATE INDEX job_comments_unjudged_idx ON job_comments (job_id, position) WHERE sentiment IS NULL;
