-- upshift_ensure_event_partitions took its advisory lock even when every partition existed, so that
-- catalog writes of different apps (each ensures the month it writes in) serialized on it until commit.
-- Look first, and lock only when a partition is missing.
CREATE OR REPLACE FUNCTION upshift_ensure_event_partitions(from_ts timestamptz, to_ts timestamptz)
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    first_month date := date_trunc('month', from_ts AT TIME ZONE 'UTC')::date;
    last_month  date := date_trunc('month', to_ts AT TIME ZONE 'UTC')::date;
    month       date;
    name        text;
    created     integer := 0;
    missing     boolean := false;
BEGIN
    month := first_month;
    WHILE month <= last_month AND NOT missing LOOP
        missing := to_regclass(format('event_log_y%sm%s', to_char(month, 'YYYY'), to_char(month, 'MM'))) IS NULL;
        month := (month + interval '1 month')::date;
    END LOOP;
    IF NOT missing THEN
        RETURN 0;
    END IF;
    -- Two servers starting at once must not race on the catalog (CREATE ... IF NOT EXISTS is not atomic).
    PERFORM pg_advisory_xact_lock(hashtext('upshift:event_log:partitions'));
    month := first_month;
    WHILE month <= last_month LOOP
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
