-- SQLite's full-text index of the comments' search terms: an FTS5 table over
-- `job_comments.terms` (external content: the index alone is stored, not a second copy of the
-- terms), kept in step by triggers, so a comment is searchable as soon as it is stored and a
-- deleted one (a removed entry, a purge, a deleted job) leaves no index row. The terms are
-- already folded and stemmed by cova; FTS5 only splits them.
-- The older rows' terms (their lower-cased text), language, author and images, from their bodies.
UPDATE job_comments SET terms = lower(json_extract(body, '$.text')),
                        language = NULLIF(json_extract(body, '$.language'), ''),
                        author = lower(json_extract(body, '$.author.handle')),
                        media = COALESCE(json_array_length(json_extract(body, '$.media')), 0) > 0;
CREATE VIRTUAL TABLE comment_terms USING fts5 (terms, content = 'job_comments', content_rowid = 'rowid',
                                              tokenize = 'unicode61 remove_diacritics 0');
-- Every row has its entry, a row without terms an empty one (FTS5 reads NULL as ''), so that
-- the entries always match the rows (`rebuild` makes one per row too).
CREATE TRIGGER comment_terms_insert AFTER INSERT ON job_comments BEGIN
    INSERT INTO comment_terms (rowid, terms) VALUES (new.rowid, new.terms);
END;
CREATE TRIGGER comment_terms_delete AFTER DELETE ON job_comments BEGIN
    INSERT INTO comment_terms (comment_terms, rowid, terms) VALUES ('delete', old.rowid, old.terms);
END;
CREATE TRIGGER comment_terms_update AFTER UPDATE OF terms ON job_comments BEGIN
    INSERT INTO comment_terms (comment_terms, rowid, terms) VALUES ('delete', old.rowid, old.terms);
    INSERT INTO comment_terms (rowid, terms) VALUES (new.rowid, new.terms);
END;
-- Their index.
INSERT INTO comment_terms (comment_terms) VALUES ('rebuild');
