-- pgbench script for `scripts/bench ingest`, case (c): the raw PostgreSQL reference for POST /v1/events
-- with 1 event per request. One row per transaction, the same row as case (a), ON CONFLICT DO NOTHING
-- RETURNING event_id as the server does.
INSERT INTO event_log
    (event_id, occurred_at, recorded_at, app_id, type, install_id, platform, app_version, data)
VALUES (gen_random_uuid(), now() - random() * interval '1 day', now(), 'bench', 'launched', gen_random_uuid(),
        'ios', '1.8.0', '{"osVersion":"17.4","locale":"en"}'::text::jsonb)
ON CONFLICT DO NOTHING
RETURNING event_id;
