-- A generation built after months were dropped reads the catalog events kept from them at their places in
-- the feed, before the log's own events, as the generation it replaces read them: `release_cohorts` learns
-- an app's releases from them (docs/OPERATIONS.md, "Retention"). Rows kept before this migration have no
-- place in the feed and are not read by the feed.
ALTER TABLE catalog_events_kept ADD COLUMN tx_id xid8, ADD COLUMN position bigint;
CREATE INDEX catalog_events_kept_feed ON catalog_events_kept (tx_id, position) WHERE tx_id IS NOT NULL;
