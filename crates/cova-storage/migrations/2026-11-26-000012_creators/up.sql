-- Creators (TikTok accounts, YouTube channels) an account follows: listed on an interval, their
-- new posts collected like a batch's URLs and kept in the library.
CREATE TABLE creators (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    -- `tiktok:user:<id>` or `youtube:channel:<UC…>`: never the handle, which can change.
    ref TEXT NOT NULL,
    platform TEXT NOT NULL,
    -- What lists its posts: TikTok's secUid, YouTube's uploads playlist.
    listing TEXT NOT NULL,
    -- The profile as last read (JSON).
    profile TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    -- Posts published before this are never taken (by default when the creator was added).
    since_at BIGINT NOT NULL,
    watch_enabled BOOLEAN NOT NULL DEFAULT FALSE,
    watch_interval_min INTEGER NOT NULL DEFAULT 360 CHECK (watch_interval_min BETWEEN 60 AND 10080),
    collect_comments BOOLEAN NOT NULL DEFAULT TRUE,
    follow_days INTEGER NOT NULL DEFAULT 3 CHECK (follow_days BETWEEN 0 AND 14),
    next_run_at BIGINT,
    last_run_at BIGINT,
    last_error TEXT,
    claimed_until BIGINT NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX creators_ref_idx ON creators (account_id, ref);
CREATE INDEX creators_due_idx ON creators (next_run_at) WHERE watch_enabled;

-- The posts a listing found, newest first per creator; the batch that collects them.
CREATE TABLE creator_posts (
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    creator_ref TEXT NOT NULL,
    post_ref TEXT NOT NULL,
    url TEXT NOT NULL,
    title TEXT,
    -- When it was published (a listing takes only dated posts).
    published_at BIGINT NOT NULL,
    pinned BOOLEAN NOT NULL DEFAULT FALSE,
    found_at BIGINT NOT NULL,
    batch_id TEXT,
    PRIMARY KEY (account_id, creator_ref, post_ref)
);
CREATE INDEX creator_posts_page_idx ON creator_posts (account_id, creator_ref, published_at, post_ref);

-- A library entry found through a creator names it; a found post is watched until `watch_until`.
ALTER TABLE analyses ADD COLUMN creator_ref TEXT;
ALTER TABLE analyses ADD COLUMN watch_until BIGINT;
