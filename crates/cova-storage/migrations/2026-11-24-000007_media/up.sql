-- Images an account can open through cova (post covers, avatars, comment images): one row per
-- image of a post per account, named by an unguessable id. The bytes live in the media store
-- under `content_key` (their SHA-256), shared by every row with the same content.
CREATE TABLE media (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    ref TEXT NOT NULL,
    -- What the image is within the post: `cover`, `author`, `avatar:<author id>`,
    -- `image:<comment id>:<k>`; a re-scrape finds the same row (and id) again.
    slot TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('cover', 'avatar', 'image')),
    -- 1, 2, 3… per (account, ref, kind): the number in a downloaded file's name.
    n INTEGER NOT NULL,
    -- The platform's link as last seen (signed; it expires).
    source_url TEXT NOT NULL,
    width INTEGER,
    height INTEGER,
    content_key TEXT,
    content_type TEXT,
    size BIGINT,
    fetched_at BIGINT,
    fetch_error TEXT,
    created_at BIGINT NOT NULL,
    -- 14 days after the scrape (or metadata read) that last listed it.
    expires_at BIGINT NOT NULL,
    UNIQUE (account_id, ref, slot)
);
CREATE INDEX media_expiry_idx ON media (expires_at);
CREATE INDEX media_content_idx ON media (content_key);
