-- Transaction-id sampler of `scripts/bench projections`: every 200 ms, one line per session of this database
-- that holds a transaction id (it wrote, and has not committed yet),
--
--   epoch s|pid|xid|query (its first 100 characters, on one line)
--
-- A transaction that holds an id holds back every feed (DESIGN.md 5.2); BenchmarkKit's XidHold turns the
-- lines into how long each id was held.
\set ON_ERROR_STOP on
SELECT round(extract(epoch FROM clock_timestamp()), 3), pid, backend_xid::text,
       left(regexp_replace(query, '\s+', ' ', 'g'), 100)
FROM pg_stat_activity
WHERE backend_xid IS NOT NULL AND datname = current_database() AND pid <> pg_backend_pid()
\watch 0.2
