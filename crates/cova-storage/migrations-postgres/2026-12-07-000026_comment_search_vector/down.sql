CREATE OR REPLACE FUNCTION cova_comments_day(day BIGINT) RETURNS VOID LANGUAGE plpgsql AS $$
DECLARE
    part TEXT := 'job_comments_d' || day;
BEGIN
    IF to_regclass(part) IS NOT NULL THEN
        RETURN;
    END IF;
    EXECUTE format('CREATE TABLE %I (LIKE job_comments INCLUDING DEFAULTS)', part);
    EXECUTE format('ALTER TABLE job_comments ATTACH PARTITION %I FOR VALUES FROM (%s) TO (%s)', part, day, day + 1);
EXCEPTION WHEN duplicate_table OR unique_violation THEN
    NULL;
END $$;
DROP INDEX job_comments_terms_idx;
ALTER TABLE job_comments DROP COLUMN terms_vector;
CREATE INDEX job_comments_terms_idx ON job_comments USING gin (to_tsvector('simple', COALESCE(terms, '')));
