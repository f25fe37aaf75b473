-- Lag sampler of `scripts/bench projections`: every 200 ms (after the previous sample's query), one line
--
--   epoch s|max lag s|name=lag s/events behind ...
--
-- where a projection's lag is now() - min(recorded_at) of the events after its checkpoint (0 when none),
-- and the max is over the active projections.
--
-- The obvious single query, a join or correlated subquery on (e.tx_id, e.position) > (p.last_tx,
-- p.last_pos), does not use the (tx_id, position) index: with the checkpoint as a parameter the planner
-- takes a third of the log to qualify and scans every partition (100+ ms at 300k events, seconds at
-- 10 M). With the checkpoint as a literal it estimates from the statistics and scans the index from the
-- checkpoint on (under 1 ms), so the function below plans one such query per projection.
\set ON_ERROR_STOP on

CREATE FUNCTION pg_temp.bench_lag(OUT name text, OUT lag_s float8, OUT behind bigint)
RETURNS SETOF record
LANGUAGE plpgsql
AS $fn$
DECLARE
    p record;
BEGIN
    FOR p IN SELECT pr.name, pr.last_tx, pr.last_pos FROM projections pr WHERE pr.state = 'active' ORDER BY pr.name LOOP
        name := p.name;
        EXECUTE format(
            'SELECT coalesce(extract(epoch FROM now() - min(recorded_at)), 0)::float8, count(*) FROM event_log
             WHERE (tx_id, position) > (%L::xid8, %s)', p.last_tx, p.last_pos)
            INTO lag_s, behind;
        RETURN NEXT;
    END LOOP;
END;
$fn$;

SELECT round(extract(epoch FROM now()), 3), round(max(greatest(lag_s, 0))::numeric, 3),
       string_agg(name || '=' || round(greatest(lag_s, 0)::numeric, 3) || '/' || behind, ' ' ORDER BY name)
FROM pg_temp.bench_lag()
\watch 0.2
