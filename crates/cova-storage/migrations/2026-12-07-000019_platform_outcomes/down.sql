ALTER TABLE jobs DROP COLUMN comments_off;
