DROP TABLE job_leases;
DROP TABLE outbox;
DROP TABLE library;
DROP TABLE job_comments;
