-- Retention (docs/OPERATIONS.md, "Retention"): with UPSHIFT_RETENTION_MONTHS set, closed months of the log
-- are archived, detached and dropped. This row says what the log no longer holds: every event before
-- `kept_from` is gone, and `dropped_tx`/`dropped_pos` is the last position of the feed a dropped event had
-- (an export cursor before it would skip events that are gone: `410`).
CREATE TABLE log_retention (
    only_row    boolean     PRIMARY KEY DEFAULT true CHECK (only_row),
    kept_from   timestamptz NOT NULL,
    dropped_tx  xid8        NOT NULL,
    dropped_pos bigint      NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- A generation created after months were dropped reads the log from `kept_from` only: it does not
-- replace a generation that read more unless the operator accepts the shorter history
-- (`upshift projections rebuild NAME --accept-shorter-history`).
ALTER TABLE projections
    ADD COLUMN history_from             timestamptz,
    ADD COLUMN shorter_history_accepted boolean NOT NULL DEFAULT false;

-- The catalog's events are its history (`GET …/history`) and what the rules read of who wrote a field and
-- when a release changed state: retention keeps them. Before a month is detached, its catalog events are
-- copied here (in the transaction that moves `kept_from`), and `catalog_events` reads each event once,
-- from the log or from here.
CREATE TABLE catalog_events_kept (
    event_id       uuid        NOT NULL,
    occurred_at    timestamptz NOT NULL,
    recorded_at    timestamptz NOT NULL,
    app_id         text        NOT NULL,
    type           text        NOT NULL,
    stream_id      text        NOT NULL,
    stream_version bigint      NOT NULL,
    data           jsonb       NOT NULL,
    PRIMARY KEY (app_id, stream_id, stream_version)
);

CREATE VIEW catalog_events AS
SELECT event_id, occurred_at, recorded_at, app_id, type, stream_id, stream_version, data
FROM event_log
WHERE stream_id IS NOT NULL AND occurred_at >= coalesce((SELECT kept_from FROM log_retention), '-infinity')
UNION ALL
SELECT event_id, occurred_at, recorded_at, app_id, type, stream_id, stream_version, data
FROM catalog_events_kept
WHERE occurred_at < (SELECT kept_from FROM log_retention);
