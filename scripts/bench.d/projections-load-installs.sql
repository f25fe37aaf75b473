-- Bulk load of the second catch-up of `scripts/bench projections`: a synthetic 60-day history of one app
-- shaped unlike projections-load.sql's, written install by install, as an import or a backfill writes a
-- log, straight into event_log with set-based SQL (DESIGN.md 5.1 and section 10).
--
--   psql -v app=APP -v installs=N -v chunks=N -v job=J -v jobs=N -v end_epoch=EPOCH -v days=D \
--        -v release_days='{...}' -v release_os='{...}' -v release_versions='{...}' \
--        -f projections-load-installs.sql
--
-- loads the chunks c of 0 ..< chunks with c % jobs = job (the bench runs `jobs` of these at once, one per
-- core).
--
-- end_epoch:        the end of the history (Unix seconds; the bench passes "now"); occurred_at runs over
--                   the `days` days before end_epoch - 5 min, so that recorded_at = occurred_at + U(0, 5 min)
--                   is never ahead of the server's clock.
-- release_days:     when each release came out, in days after the start of the history (ascending; the
--                   first must be before the history starts). The catalog holds the same releases (the bench
--                   adds them with `upshift releases add`, with a policy that forces an update once a release
--                   it was offered has been out 30 days, and dates their catalog events back to before the
--                   history starts).
-- release_os:       the major of each release's minimum OS (ascending).
-- release_versions: each release's version (ascending).
--
-- The model, per install k in [0, installs); every trait comes from a hash of k (the same in every chunk):
--   - 35% of the installs exist when the history starts, on the first release or what their update delay
--     gives; the others are installed at a time spread evenly over the 60 days (by hash, not in the order
--     of k), on the newest release their OS runs. 20% stop before the end (at 15-100% of what was left of
--     their time); the others are active until the end.
--   - 3 to 20 events (3 + floor(18 u^1.4), about 10 on average), one in each n-th of the time the install
--     is active, at a random point of it; the first is its first sighting, a `launched`.
--   - OS: iOS 15, 16, 17, 18 for 8%, 17%, 30%, 45% of the installs, with a minor (and a patch for a third);
--     a locale of 12; 6% check on the beta channel; half the installs send a build number.
--   - Update delay: 50% take about 1.5 days (exponential), 30% 2 + about 10 days, 12% 7 + about 20 days,
--     8% never update. An install runs the newest release that was out `delay` days ago, never below the
--     one it was installed with, never above the newest its OS runs.
--   - Type of each later event: `updated` (with fromVersion) when its version is above its previous
--     event's, else `whats_new_shown` right after an update for 70% of the installs; else for an install
--     behind the newest release its OS runs 9% `prompt_shown`, 6% `prompt_dismissed` (soft; 1 in 5 skip)
--     or `blocked` (force: a release it was offered has been out 30 days), 3% `update_started`, with
--     targetVersion = that newest release; else `abnormal_exit` (2%, 12% for one install in ten),
--     `launched` or `checked` (about 45 / 55; with action, reason, latestVersion and channel as the server
--     writes them). Every event carries osVersion and locale in data, and build when the install sends it.
--     These are all the types of DESIGN.md section 5 but install_forgotten, which stands for an erasure
--     that removed the install's events, and which the server does not write yet.
--   - event_id is a UUIDv7 of occurred_at (as clients are advised to send).
--
-- Chunk c of `chunks` holds the events of the c-th slice of the 60 days, inserted by one statement in a
-- transaction of its own, its rows in the order of install, then time: each install's events of the
-- slice together, unlike the main load's rows, in time order. Projections close adoption days 31 days
-- behind the largest recorded_at read, so a transaction's slice spans fewer days than that, less the
-- slices loaded at once (the bench makes chunks >= (jobs + 1) * days / 30), or events would not count.
\set ON_ERROR_STOP on

-- A number in [0, 1) from a hash of x.
CREATE FUNCTION pg_temp.shape_u(x bigint, seed bigint) RETURNS float8
LANGUAGE sql IMMUTABLE AS $$ SELECT (hashint8extended(x, seed) & 4294967295)::float8 / 4294967296 $$;

-- When (days after the start) event j of install k comes, of n spread over [a0, a1).
CREATE FUNCTION pg_temp.shape_time(k bigint, j integer, n integer, a0 float8, a1 float8) RETURNS float8
LANGUAGE sql IMMUTABLE AS $$ SELECT a0 + (a1 - a0) * (j + pg_temp.shape_u(k * 32 + j, 41)) / n $$;

-- The release (0-based index) an install runs at day d.
CREATE FUNCTION pg_temp.shape_release(d float8, delay float8, r_birth integer, r_os integer, release_days float8[])
RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
    SELECT greatest(least(greatest(width_bucket(d - delay, release_days) - 1, r_birth), r_os,
                          width_bucket(d, release_days) - 1), 0)
$$;

CREATE FUNCTION pg_temp.bench_load_installs_chunk(
    chunk integer, chunks integer, n_installs bigint, app text, end_at timestamptz, days integer,
    release_days float8[], release_os integer[], versions text[]
) RETURNS bigint
LANGUAGE plpgsql
AS $fn$
DECLARE
    -- occurred_at spans [start_at, start_at + span_days): `days` less 5 minutes, ending 5 minutes before end_at.
    start_at  timestamptz := end_at - days * interval '1 day';
    span_days float8 := days - 5.0 / 1440;
    lo        float8 := chunk * span_days / chunks;
    hi        float8 := (chunk + 1) * span_days / chunks;
    inserted  bigint;
BEGIN
    -- Each step a subquery (OFFSET 0: computed once, not inlined into the next), in the order of install,
    -- then event: nothing sorts, so the rows are inserted, and numbered (position), in that order.
    WITH installs AS (
        -- The install's traits.
        SELECT k, h.existing, h.birth,
               CASE WHEN h.existing THEN 0 ELSE h.birth END AS a0,
               pg_temp.shape_u(k, 27) < 0.2 AS churns,
               3 + floor(18 * power(pg_temp.shape_u(k, 29), 1.4))::integer AS n,
               width_bucket(h.os_major, release_os) - 1 AS r_os,
               h.os_major || '.' || (hashint8extended(k, 22) & 65535) % 7
                   || CASE WHEN (hashint8extended(k, 22) >> 16 & 65535) % 3 = 0
                           THEN '.' || 1 + (hashint8extended(k, 22) >> 32 & 65535) % 4 ELSE '' END AS os_version,
               (ARRAY['en-US', 'en-US', 'en-GB', 'de-DE', 'fr-FR', 'es-ES', 'ja-JP', 'zh-Hans-CN', 'pt-BR', 'it-IT',
                      'ko-KR', 'nl-NL'])[1 + (hashint8extended(k, 30) & 65535) % 12] AS locale,
               CASE WHEN pg_temp.shape_u(k, 31) < 0.06 THEN 'beta' ELSE 'live' END AS channel,
               CASE WHEN pg_temp.shape_u(k, 32) < 0.1 THEN 0.12 ELSE 0.02 END AS crash_rate,
               pg_temp.shape_u(k, 33) < 0.5 AS sends_build,
               pg_temp.shape_u(k, 34) < 0.7 AS shows_whats_new,
               CASE WHEN h.u_class < 0.50 THEN -ln(1 - h.u_delay) * 1.5
                    WHEN h.u_class < 0.80 THEN 2 - ln(1 - h.u_delay) * 10
                    WHEN h.u_class < 0.92 THEN 7 - ln(1 - h.u_delay) * 20
                    ELSE 1e6 END AS delay
        FROM generate_series(0, n_installs - 1) AS k
        CROSS JOIN LATERAL (
            SELECT pg_temp.shape_u(k, 25) < 0.35 AS existing,
                   pg_temp.shape_u(k, 26) * span_days * 0.98 AS birth,
                   CASE WHEN pg_temp.shape_u(k, 21) < 0.08 THEN 15 WHEN pg_temp.shape_u(k, 21) < 0.25 THEN 16
                        WHEN pg_temp.shape_u(k, 21) < 0.55 THEN 17 ELSE 18 END AS os_major,
                   pg_temp.shape_u(k, 23) AS u_class,
                   pg_temp.shape_u(k, 24) AS u_delay
        ) AS h
        OFFSET 0
    ), lives AS (
        -- What it was installed with, and until when it is active.
        SELECT i.*,
               CASE WHEN i.existing THEN 0 ELSE least(greatest(width_bucket(i.birth, release_days) - 1, 0), i.r_os) END
                   AS r_birth,
               CASE WHEN i.churns THEN i.a0 + (span_days - i.a0) * (0.15 + 0.85 * pg_temp.shape_u(i.k, 28))
                    ELSE span_days END AS a1
        FROM installs AS i
        OFFSET 0
    ), events AS (
        -- Its events in this chunk's slice [lo, hi) of the history: their indexes, with a margin, then exactly.
        SELECT l.*, x.i, pg_temp.shape_time(l.k, x.i, l.n, l.a0, l.a1) AS d,
               pg_temp.shape_u(l.k * 32 + x.i, 42) AS u_type, pg_temp.shape_u(l.k * 32 + x.i, 43) AS u_other
        FROM lives AS l
        CROSS JOIN LATERAL generate_series(
            greatest(floor((lo - l.a0) / (l.a1 - l.a0) * l.n)::integer - 1, 0),
            least(ceil((hi - l.a0) / (l.a1 - l.a0) * l.n)::integer + 1, l.n - 1)) AS x(i)
        WHERE l.a0 <= hi AND l.a1 >= lo
          AND least(floor(pg_temp.shape_time(l.k, x.i, l.n, l.a0, l.a1) * chunks / span_days)::integer, chunks - 1) = chunk
        OFFSET 0
    ), releases AS (
        -- The release it runs then and at its previous two events; what it is offered, what is out.
        SELECT e.*,
               pg_temp.shape_release(e.d, e.delay, e.r_birth, e.r_os, release_days) AS r,
               CASE WHEN e.i >= 1 THEN pg_temp.shape_release(
                   pg_temp.shape_time(e.k, e.i - 1, e.n, e.a0, e.a1), e.delay, e.r_birth, e.r_os, release_days) END AS r_prev,
               CASE WHEN e.i >= 2 THEN pg_temp.shape_release(
                   pg_temp.shape_time(e.k, e.i - 2, e.n, e.a0, e.a1), e.delay, e.r_birth, e.r_os, release_days) END AS r_prev2,
               width_bucket(e.d, release_days) - 1 AS r_out,
               least(width_bucket(e.d, release_days) - 1, e.r_os) AS r_offer
        FROM events AS e
        OFFSET 0
    ), states AS (
        SELECT r.*,
               r.r < r.r_offer AS behind,
               -- Forced: the oldest release it is offered (r + 1) has been out 30 days (policy blockAfterDays).
               r.r < r.r_offer AND release_days[r.r + 2] <= r.d - 30 AS force
        FROM releases AS r
        OFFSET 0
    ), typed AS (
        SELECT t.*,
               CASE WHEN t.force THEN 'force' ELSE 'soft' END AS kind,
               CASE
                   WHEN t.i = 0 THEN 'launched'
                   WHEN t.r > t.r_prev THEN 'updated'
                   WHEN t.i >= 2 AND t.r_prev > t.r_prev2 AND t.shows_whats_new THEN 'whats_new_shown'
                   WHEN t.behind AND t.u_type < 0.09 THEN 'prompt_shown'
                   WHEN t.behind AND t.u_type < 0.15 THEN CASE WHEN t.force THEN 'blocked' ELSE 'prompt_dismissed' END
                   WHEN t.behind AND t.u_type < 0.18 THEN 'update_started'
                   WHEN t.u_other < t.crash_rate THEN 'abnormal_exit'
                   WHEN t.u_other < 0.45 THEN 'launched'
                   ELSE 'checked'
               END AS type,
               start_at + t.d * interval '1 day' AS occurred_at
        FROM states AS t
        OFFSET 0
    )
    INSERT INTO event_log (event_id, occurred_at, recorded_at, app_id, type, install_id, platform, app_version, data)
    SELECT
        (lpad(to_hex((extract(epoch FROM s.occurred_at) * 1000)::bigint), 12, '0') || '7'
            || substr(replace(gen_random_uuid()::text, '-', ''), 14, 19))::uuid,
        s.occurred_at,
        s.occurred_at + random() * interval '5 minutes',
        app,
        s.type,
        md5('upshift-bench-shape-install:' || s.k)::uuid,
        'ios',
        versions[s.r + 1],
        jsonb_build_object('osVersion', s.os_version, 'locale', s.locale)
            || CASE WHEN s.sends_build THEN jsonb_build_object('build', 1000 + 10 * s.r + s.k % 7) ELSE '{}'::jsonb END
            || CASE s.type
                WHEN 'checked' THEN jsonb_build_object(
                    'action', CASE WHEN s.force THEN 'force' WHEN s.behind THEN 'soft' ELSE 'none' END,
                    'reason', CASE WHEN s.force THEN 'release_overdue' WHEN s.behind THEN 'update_available'
                                   WHEN s.r_os < s.r_out THEN 'os_unsupported' ELSE 'up_to_date' END,
                    'latestVersion', versions[s.r_offer + 1],
                    'channel', s.channel)
                WHEN 'prompt_shown' THEN jsonb_build_object('promptKind', s.kind, 'targetVersion', versions[s.r_offer + 1])
                WHEN 'update_started' THEN jsonb_build_object('promptKind', s.kind, 'targetVersion', versions[s.r_offer + 1])
                WHEN 'prompt_dismissed' THEN jsonb_build_object(
                    'promptKind', 'soft', 'targetVersion', versions[s.r_offer + 1],
                    'dismissAction', CASE WHEN s.u_other < 0.2 THEN 'skip' ELSE 'later' END)
                WHEN 'blocked' THEN jsonb_build_object('targetVersion', versions[s.r_offer + 1])
                WHEN 'updated' THEN jsonb_build_object('fromVersion', versions[s.r_prev + 1])
                ELSE '{}'::jsonb
            END
    FROM typed AS s;
    GET DIAGNOSTICS inserted = ROW_COUNT;
    RETURN inserted;
END;
$fn$;

\timing on
-- One statement, and so one transaction, per chunk: this job's share of them.
SELECT format('SELECT %s AS chunk, pg_temp.bench_load_installs_chunk(%s, %s, %s, %L, to_timestamp(%s), %s, %L, %L, %L) AS events',
              c, c, :chunks, :installs, :'app', :end_epoch, :days, :'release_days', :'release_os', :'release_versions')
FROM generate_series(0, :chunks - 1) AS c
WHERE c % :jobs = :job
\gexec
\timing off
