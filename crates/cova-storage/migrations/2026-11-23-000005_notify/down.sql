DROP TABLE deliveries;
DROP TABLE keyword_alerts;
ALTER TABLE accounts DROP COLUMN alert_seq;
DROP TABLE channels;
DROP TABLE keywords;
