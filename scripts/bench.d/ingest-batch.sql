-- pgbench script for `scripts/bench ingest`, case (a): the raw PostgreSQL reference for POST /v1/events
-- with 100 events per request. One transaction inserts :n rows (pgbench -D n=100) with the statement
-- the server's group commit uses (Sources/UpshiftStore/EventLog.swift): INSERT ... SELECT FROM unnest of
-- one array per column, ON CONFLICT DO NOTHING, RETURNING event_id. The arrays are built in the
-- statement instead of bound, and the JSON travels as text and is cast, as the server sends it.
INSERT INTO event_log
    (event_id, occurred_at, recorded_at, app_id, type, install_id, platform, app_version, data)
SELECT e.id, e.occurred_at, now(), e.app_id, e.type, e.install_id, e.platform, e.app_version, e.data::jsonb
FROM unnest(
        ARRAY(SELECT gen_random_uuid() FROM generate_series(1, (:n)::int)),
        ARRAY(SELECT now() - random() * interval '1 day' FROM generate_series(1, (:n)::int)),
        array_fill('bench'::text, ARRAY[(:n)::int]),
        array_fill('launched'::text, ARRAY[(:n)::int]),
        ARRAY(SELECT gen_random_uuid() FROM generate_series(1, (:n)::int)),
        array_fill('ios'::text, ARRAY[(:n)::int]),
        array_fill('1.8.0'::text, ARRAY[(:n)::int]),
        array_fill('{"osVersion":"17.4","locale":"en"}'::text, ARRAY[(:n)::int]))
     AS e(id, occurred_at, app_id, type, install_id, platform, app_version, data)
ON CONFLICT DO NOTHING
RETURNING event_id;
