-- Each comment's sentiment as the offline analyzer judged it (0 positive, 1 neutral, 2
-- negative), judged once when the comment is first stored and carried to later scrapes of the
-- post: a spike check reads labels instead of judging the post's history again. NULL: not yet
-- judged (comments stored before this column; judged at their post's next check).
ALTER TABLE job_comments ADD COLUMN sentiment SMALLINT;
