-- The append-only event log (DESIGN.md 5.1). Column names are fixed: operators and tools query them.
-- PostgreSQL 15 cannot put an identity column on a partitioned table, so `position` takes its
-- values from a sequence of its own, which is what an identity column would do.
CREATE SEQUENCE event_log_position_seq AS bigint;

CREATE TABLE event_log (
    event_id       uuid        NOT NULL,
    occurred_at    timestamptz NOT NULL,
    recorded_at    timestamptz NOT NULL,
    app_id         text        NOT NULL,
    type           text        NOT NULL,
    install_id     uuid,                 -- null for catalog events
    platform       text,
    app_version    text,
    stream_id      text,                 -- `app:{id}` for catalog events, null for client events
    stream_version bigint,
    tx_id          xid8        NOT NULL DEFAULT pg_current_xact_id(),
    position       bigint      NOT NULL DEFAULT nextval('event_log_position_seq'),
    data           jsonb       NOT NULL DEFAULT '{}'::jsonb,
    PRIMARY KEY (event_id, occurred_at)
) PARTITION BY RANGE (occurred_at);

ALTER SEQUENCE event_log_position_seq OWNED BY event_log.position;

-- The gap-free feed reads in (tx_id, position) order (DESIGN.md 5.2).
CREATE INDEX event_log_feed ON event_log (tx_id, position);
CREATE INDEX event_log_stream ON event_log (stream_id, stream_version) WHERE stream_id IS NOT NULL;

/* Monthly partitions, created ahead of need by the server at start and daily.
   There is no default partition: PostgreSQL refuses to add a month while a default
   partition holds rows of it, and validation keeps occurred_at inside the months created. */
CREATE FUNCTION upshift_ensure_event_partitions(from_ts timestamptz, to_ts timestamptz)
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    month   date := date_trunc('month', from_ts AT TIME ZONE 'UTC')::date;
    last    date := date_trunc('month', to_ts AT TIME ZONE 'UTC')::date;
    name    text;
    created integer := 0;
BEGIN
    -- Two servers starting at once must not race on the catalog (CREATE ... IF NOT EXISTS is not atomic).
    PERFORM pg_advisory_xact_lock(hashtext('upshift:event_log:partitions'));
    WHILE month <= last LOOP
        name := format('event_log_y%sm%s', to_char(month, 'YYYY'), to_char(month, 'MM'));
        IF to_regclass(name) IS NULL THEN
            EXECUTE format(
                'CREATE TABLE %I PARTITION OF event_log FOR VALUES FROM (%L) TO (%L)',
                name,
                to_char(month, 'YYYY-MM-DD') || ' 00:00:00+00',
                to_char((month + interval '1 month')::date, 'YYYY-MM-DD') || ' 00:00:00+00');
            created := created + 1;
        END IF;
        month := (month + interval '1 month')::date;
    END LOOP;
    RETURN created;
END;
$$;

-- Stream heads for optimistic concurrency on catalog streams (`app:{id}`): a partitioned table
-- cannot hold a unique (stream_id, stream_version), so the head lives here, advanced by CAS.
CREATE TABLE streams (
    stream_id text   PRIMARY KEY,
    version   bigint NOT NULL CHECK (version >= 0)
);
