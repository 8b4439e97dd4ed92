-- PostgreSQL's search vector of each comment, stored with the row and indexed: ranking a search
-- built the vector of every matching comment again from its terms, about a quarter of the time
-- of a common word's search over a million comments. Written by the database with the row (the
-- same `simple` vector the index held), never by cova, so SQLite's schema is unchanged.
ALTER TABLE job_comments ADD COLUMN terms_vector tsvector
    GENERATED ALWAYS AS (to_tsvector('simple', COALESCE(terms, ''))) STORED;
DROP INDEX job_comments_terms_idx;
CREATE INDEX job_comments_terms_idx ON job_comments USING gin (terms_vector);

-- A day's partition is made like the parent with its generated column (a plain column is refused
-- when the partition is attached).
CREATE OR REPLACE FUNCTION cova_comments_day(day BIGINT) RETURNS VOID LANGUAGE plpgsql AS $$
DECLARE
    part TEXT := 'job_comments_d' || day;
BEGIN
    IF to_regclass(part) IS NOT NULL THEN
        RETURN;
    END IF;
    EXECUTE format('CREATE TABLE %I (LIKE job_comments INCLUDING DEFAULTS INCLUDING GENERATED)', part);
    EXECUTE format('ALTER TABLE job_comments ATTACH PARTITION %I FOR VALUES FROM (%s) TO (%s)', part, day, day + 1);
EXCEPTION WHEN duplicate_table OR unique_violation THEN
    -- Another process made it at the same moment.
    NULL;
END $$;
