-- What the platform showed: the post's author turned its comments off (the job completed with
-- none to collect, and says so rather than looking like an empty success).
ALTER TABLE jobs ADD COLUMN comments_off BOOLEAN NOT NULL DEFAULT FALSE;
