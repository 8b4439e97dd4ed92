-- The janitor looks for expired breakdowns that still point at a scrape on every tick: a
-- partial index keeps that look proportional to what is left to purge, not to the library.
CREATE INDEX analyses_purge_idx ON analyses (id) WHERE last_job_id IS NOT NULL AND status <> 'ready';
