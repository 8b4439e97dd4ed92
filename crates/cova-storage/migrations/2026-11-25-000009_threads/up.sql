-- The position of the top-level comment each comment belongs to (its own for a top-level
-- comment), set when the job completes: a page of a result in platform order is one range of
-- (job_id, thread, position), a parent before its replies, read in one statement.
ALTER TABLE job_comments ADD COLUMN thread BIGINT;
UPDATE job_comments SET thread = COALESCE(
    (SELECT p.position FROM job_comments p
     WHERE p.job_id = job_comments.job_id AND p.comment_id = job_comments.parent_id),
    position);
CREATE INDEX job_comments_thread_idx ON job_comments (job_id, thread, position);
