DROP TABLE jobs;
DROP TABLE ledger;
DROP TABLE reservations;
DROP TABLE balances;
DROP TABLE api_tokens;
DROP TABLE accounts;
