-- What searching every comment an account has kept reads besides the text: the comment's
-- search terms (its words as `cova_analyzers::search::index_terms` makes them: folded, stemmed
-- in its language, emoji by code point), its language, its author's handle (lower-cased) and
-- whether it has images. Rows stored before this get their lower-cased text as terms from each
-- database's own migration (found by whole words until their post is collected again; they
-- expire within 14 days anyway).
ALTER TABLE job_comments ADD COLUMN terms TEXT;
ALTER TABLE job_comments ADD COLUMN language TEXT;
ALTER TABLE job_comments ADD COLUMN author TEXT;
ALTER TABLE job_comments ADD COLUMN media BOOLEAN NOT NULL DEFAULT FALSE;
