ALTER TABLE keyword_alerts DROP COLUMN creator;
