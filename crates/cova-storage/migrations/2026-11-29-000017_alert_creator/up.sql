-- The followed creator whose new post raised the alert ({ref, handle, name} as JSON), so that
-- GET /keyword-alerts names it as the webhook and the Telegram message do. NULL otherwise.
ALTER TABLE keyword_alerts ADD COLUMN creator TEXT;
