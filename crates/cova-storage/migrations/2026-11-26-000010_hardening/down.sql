DROP TABLE queue_journal;
ALTER TABLE purchases DROP COLUMN mismatch_event_id;
ALTER TABLE purchases DROP COLUMN mismatch;
