-- One id, one event (DESIGN.md section 5): idempotency is per (app, event id), whatever the partitioning.
-- event_log's primary key is (event_id, occurred_at), as the partitioning by month of occurred_at requires,
-- so an id resent with another occurredAt used to be stored twice. Ingestion now claims (app_id, event_id)
-- here first, in key order (so that concurrent group commits that share ids never deadlock), and appends
-- to event_log only the events it claimed. occurred_at locates the stored event in its partition, to tell
-- a resend (same fields: duplicate) from a conflict (another event under the same id).
-- Server-written `checked` events carry random ids of the server's own and are not claimed here.
CREATE TABLE event_ids (
    app_id      text        NOT NULL,
    event_id    uuid        NOT NULL,
    occurred_at timestamptz NOT NULL,
    PRIMARY KEY (app_id, event_id)
);

-- The events already stored: the first of an (app, id) by log order keeps the id.
INSERT INTO event_ids (app_id, event_id, occurred_at)
SELECT DISTINCT ON (app_id, event_id) app_id, event_id, occurred_at
FROM event_log
WHERE install_id IS NOT NULL AND type <> 'checked'
ORDER BY app_id, event_id, tx_id, position;
