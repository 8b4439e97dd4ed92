-- What a spike check reads of a post's comments, from the index alone: how many were posted
-- per bucket of the last two weeks, and the stored sentiment of the latest ones (newest first,
-- ties in collection order). Without it each check read every stored row of the post, bodies
-- included, so its cost grew with the post's history.
CREATE INDEX job_comments_posted_idx ON job_comments (job_id, comments_day, posted_at DESC, position, sentiment);
