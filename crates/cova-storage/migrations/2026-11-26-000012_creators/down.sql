ALTER TABLE analyses DROP COLUMN watch_until;
ALTER TABLE analyses DROP COLUMN creator_ref;
DROP TABLE creator_posts;
DROP TABLE creators;
