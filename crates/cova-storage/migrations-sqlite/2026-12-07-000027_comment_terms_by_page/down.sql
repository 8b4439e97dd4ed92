CREATE TRIGGER comment_terms_insert AFTER INSERT ON job_comments BEGIN
    INSERT INTO comment_terms (rowid, terms) VALUES (new.rowid, new.terms);
END;
