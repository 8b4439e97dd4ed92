DROP INDEX jobs_batch_idx;
DROP INDEX jobs_account_created_idx;
ALTER TABLE jobs DROP COLUMN truncated_reason;
ALTER TABLE jobs DROP COLUMN comments_new;
ALTER TABLE jobs DROP COLUMN batch_id;
DROP TABLE batch_items;
DROP TABLE batches;
