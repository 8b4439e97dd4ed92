-- A payment event whose amount, currency or status does not match the checkout cova opened
-- grants nothing: the purchase keeps why, and the event, for the operator to look at.
ALTER TABLE purchases ADD COLUMN mismatch TEXT;
ALTER TABLE purchases ADD COLUMN mismatch_event_id TEXT;

-- What the in-process queue of the embedded mode holds (a message per queue), so that a
-- restart loses no command or event not yet handled: written before a message is handed over,
-- deleted when it is acknowledged.
CREATE TABLE queue_journal (
    queue TEXT NOT NULL,
    id TEXT NOT NULL,
    routing_key TEXT NOT NULL,
    payload TEXT NOT NULL,
    headers TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    kept_at BIGINT NOT NULL,
    PRIMARY KEY (queue, id)
);
