-- A set-based catch-up in steps (issue 20): each step is a transaction of its own, so that none holds a
-- transaction id for long (and with it the feed's horizon, DESIGN.md 5.2). The catch-up's bound (the last
-- event it covers) is fixed when it starts, and the steps committed are counted with each step, so that
-- a restart continues after the last one instead of starting over.
ALTER TABLE projections
    ADD COLUMN backfill_tx    xid8,
    ADD COLUMN backfill_pos   bigint,
    ADD COLUMN backfill_steps integer NOT NULL DEFAULT 0;
