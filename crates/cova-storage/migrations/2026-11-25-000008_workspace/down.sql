ALTER TABLE reservations DROP COLUMN free_amount;
DROP INDEX jobs_session_idx;
ALTER TABLE jobs DROP COLUMN session_id;
DROP TABLE purchases;
DROP TABLE email_links;
DROP TABLE sessions;
ALTER TABLE accounts DROP COLUMN password_hash;
