-- A page of stored comments enters SQLite's full-text index in one statement
-- (`repo::search::index_rows_after`, called by the scraper's write of the page), not row by row
-- from a trigger: FTS5 writes out what it holds at the end of every statement, so a trigger made
-- one index segment per comment, which it then merged, and storing 1,000 comments took about
-- half as long again as without the index. Deletes and changed terms keep their triggers.
DROP TRIGGER comment_terms_insert;
