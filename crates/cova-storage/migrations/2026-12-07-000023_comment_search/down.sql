ALTER TABLE job_comments DROP COLUMN media;
ALTER TABLE job_comments DROP COLUMN author;
ALTER TABLE job_comments DROP COLUMN language;
ALTER TABLE job_comments DROP COLUMN terms;
