DROP TABLE spike_alerts;
DROP TABLE spike_settings;
