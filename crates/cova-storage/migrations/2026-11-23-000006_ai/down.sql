DROP TABLE ai_queries;
DROP TABLE ai_consents;
DROP TABLE ai_jobs;
DROP TABLE ai_quotes;
