-- PostgreSQL's full-text index of the comments' search terms: a GIN index over their
-- `simple` text search vector (the terms are already folded and stemmed by cova, the same for
-- both backends), one per day partition, so a purged day leaves no index rows behind.
-- The older rows' terms (their lower-cased text), language, author and images, from their bodies.
UPDATE job_comments SET terms = lower(body::jsonb ->> 'text'),
                        language = NULLIF(body::jsonb ->> 'language', ''),
                        author = lower(body::jsonb #>> '{author,handle}'),
                        media = COALESCE(jsonb_array_length(CASE WHEN jsonb_typeof(body::jsonb -> 'media') = 'array'
                                                                 THEN body::jsonb -> 'media' END), 0) > 0;
CREATE INDEX job_comments_terms_idx ON job_comments USING gin (to_tsvector('simple', COALESCE(terms, '')));
