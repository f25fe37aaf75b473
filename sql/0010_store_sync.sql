-- The store sync's schedule (issue 19; docs/CLIENTS.md, "Import from the App Store"): when each app's
-- App Store lookup was last asked, when it may be asked next and how many times in a row it failed. Kept
-- in the database, not in memory, so that no instance asks more than once per interval, across restarts
-- and takeovers, and failures back off.
CREATE TABLE store_sync (
    app_id       text        NOT NULL REFERENCES apps (app_id),
    platform     text        NOT NULL,
    attempted_at timestamptz NOT NULL,
    next_at      timestamptz NOT NULL,
    failures     integer     NOT NULL DEFAULT 0,
    outcome      text        NOT NULL,  -- added, present, not_listed, refused, failed; asking while in flight
    detail       text,
    PRIMARY KEY (app_id, platform)
);
