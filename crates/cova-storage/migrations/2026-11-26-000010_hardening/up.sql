-- A payment event whose amount, currency or status does not match the checkout cova opened
-- grants nothing: the purchase keeps why, and the event, for the operator to look at.
ALTER TABLE purchases ADD COLUMN mismatch TEXT;
ALTER TABLE purchases ADD COLUMN mismatch_event_id TEXT;
