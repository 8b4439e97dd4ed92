DROP TRIGGER comment_terms_update;
DROP TRIGGER comment_terms_delete;
DROP TRIGGER comment_terms_insert;
DROP TABLE comment_terms;
