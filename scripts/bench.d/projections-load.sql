-- Bulk load of `scripts/bench projections`: a synthetic 90-day event history of one app, written
-- straight into event_log with set-based SQL (DESIGN.md 5.1 and section 10).
--
--   psql -v app=APP -v events=N -v installs=N -v chunks=N -v job=J -v jobs=N -v end_epoch=EPOCH \
--        -v release_days='{...}' -v release_os='{...}' -f projections-load.sql
--
-- loads the chunks c of 0 ..< chunks with c % jobs = job (the bench runs `jobs` of these at once, one per
-- core).
--
-- end_epoch:    the end of the history (Unix seconds; the bench passes "now"); occurred_at runs over the
--               90 days before end_epoch - 5 min, so that recorded_at = occurred_at + U(0, 5 min) is never
--               ahead of the server's clock.
-- release_days: when each release 1.0.0, 1.1.0, ... came out, in days after the start of the history
--               (ascending; the first may be negative: released before it). The catalog holds the same
--               releases (scripts/bench adds them with `upshift releases add` before this load, so that
--               their catalog events precede the client events in the feed, and dates those events back
--               to before the history starts).
-- release_os:   the major of each release's minimum OS (ascending).
--
-- The model, per install k in [0, installs) (its traits come from hashes of k, so they hold across chunks):
--   - 40% of the installs exist when the history starts (first seen over its first 9 days, on what the
--     release schedule and their update delay give); the other 60% are installed at an even pace over
--     the 90 days, each on the newest release its OS runs, and first seen with a `launched` event.
--   - Every install has an update delay: 55% take about 2 days (exponential), 35% 1 + about 8 days,
--     10% never update (automatic updates off). An install runs the newest release that was out
--     `delay` days ago, never below the one it was installed with, never above the newest its OS runs
--     (iOS 15, 16, 17, 18 for 6%, 16%, 38%, 40% of the installs; minimum OS per release above).
--   - Apart from the first sightings, events fall evenly over time on installs picked at random
--     among those installed by then. Type: `updated` (35% of the events within a day after an
--     update, with fromVersion), else for an install behind the newest release its OS runs 8%
--     `prompt_shown`, 4% `prompt_dismissed` (later, 1 in 8 skip), 2% `update_started` (soft prompt,
--     targetVersion = that newest release), else `launched` or `checked` (about 43 / 57, the latter with
--     action, reason and latestVersion as the server writes them). Every event carries osVersion and locale in data.
--   - event_id is a UUIDv7 of occurred_at (as clients are advised to send), so that the primary key
--     grows at its right edge like the log.
--
-- Chunk c of `chunks` holds the events of the c-th slice of the 90 days, inserted by one statement in a
-- transaction of its own, so the feed has `chunks` tx_ids, in time order give or take the chunks loaded
-- at once (projections close adoption days 31 days behind the largest recorded_at read: a feed far out
-- of time order would not be realistic, and would lose events).
\set ON_ERROR_STOP on

CREATE FUNCTION pg_temp.bench_load_chunk(
    chunk integer, chunks integer, n_events bigint, n_installs bigint, app text, end_at timestamptz,
    release_days float8[], release_os integer[]
) RETURNS bigint
LANGUAGE plpgsql
AS $fn$
DECLARE
    -- occurred_at spans [start_at, start_at + span): 90 days less 5 minutes, ending 5 minutes before end_at.
    start_at  timestamptz := end_at - interval '90 days';
    span      interval := interval '90 days' - interval '5 minutes';
    span_days float8 := extract(epoch FROM interval '90 days' - interval '5 minutes') / 86400;
    n_old     bigint := round(n_installs * 0.4);
    n_new     bigint := n_installs - round(n_installs * 0.4);
    -- The events that are not first sightings.
    n_rest    bigint := n_events - n_installs;
    lo        float8 := chunk::float8 / chunks;
    hi        float8 := (chunk + 1)::float8 / chunks;
    -- Existing installs are first seen in the first tenth of the history.
    old_share float8 := 0.1;
    inserted  bigint;
BEGIN
    INSERT INTO event_log (event_id, occurred_at, recorded_at, app_id, type, install_id, platform, app_version, data)
    SELECT
        (lpad(to_hex((extract(epoch FROM s.occurred_at) * 1000)::bigint), 12, '0') || '7'
            || substr(replace(gen_random_uuid()::text, '-', ''), 14, 19))::uuid,
        s.occurred_at,
        s.occurred_at + s.u_recorded * interval '5 minutes',
        app,
        s.type,
        md5('upshift-bench-install:' || s.k)::uuid,
        'ios',
        '1.' || s.r || '.0',
        jsonb_build_object('osVersion', s.os_version, 'locale', s.locale)
            || CASE s.type
                WHEN 'checked' THEN jsonb_build_object(
                    'action', CASE WHEN s.behind THEN 'soft' ELSE 'none' END,
                    'reason', CASE WHEN s.behind THEN 'update_available' ELSE 'up_to_date' END,
                    'latestVersion', '1.' || s.r_offer || '.0')
                WHEN 'prompt_shown' THEN jsonb_build_object('promptKind', 'soft', 'targetVersion', '1.' || s.r_offer || '.0')
                WHEN 'update_started' THEN jsonb_build_object('promptKind', 'soft', 'targetVersion', '1.' || s.r_offer || '.0')
                WHEN 'prompt_dismissed' THEN jsonb_build_object(
                    'promptKind', 'soft', 'targetVersion', '1.' || s.r_offer || '.0',
                    'dismissAction', CASE WHEN s.u_type < 0.085 THEN 'skip' ELSE 'later' END)
                WHEN 'updated' THEN jsonb_build_object('fromVersion', '1.' || greatest(s.r - 1, s.r_birth, 0) || '.0')
                ELSE '{}'::jsonb
            END
    FROM (
        -- The event's type, from the install's state at that time.
        SELECT v.*,
               CASE
                   WHEN v.first_sighting THEN 'launched'
                   WHEN v.since_update < 1 AND v.u_type >= 0.65 THEN 'updated'
                   WHEN v.behind AND v.u_type < 0.08 THEN 'prompt_shown'
                   WHEN v.behind AND v.u_type < 0.12 THEN 'prompt_dismissed'
                   WHEN v.behind AND v.u_type < 0.14 THEN 'update_started'
                   WHEN v.u_type < 0.43 THEN 'launched'
                   ELSE 'checked'
               END AS type
        FROM (
            -- The install's version then (index r into the releases), and what it is offered (r_offer).
            SELECT w.*,
                   w.r_cur < w.r_offer AS behind,
                   -- Days since the install moved to r_cur by updating (not when installed on it).
                   CASE WHEN w.r_cur > w.r_birth AND w.r_cur = w.r_delayed
                        THEN w.d - (release_days[w.r_cur + 1] + w.delay) ELSE 1e9 END AS since_update,
                   w.r_cur AS r
            FROM (
                SELECT t.*,
                       least(greatest(t.r_delayed, t.r_birth), t.r_os, t.r_out) AS r_cur,
                       least(t.r_out, t.r_os) AS r_offer
                FROM (
                    SELECT a.*,
                           -- Releases out by then, by (then - delay), at installation; and the newest its OS runs.
                           width_bucket(a.d, release_days) - 1 AS r_out,
                           greatest(width_bucket(a.d - a.delay, release_days) - 1, 0) AS r_delayed,
                           CASE WHEN a.k < n_old THEN 0
                                ELSE least(greatest(width_bucket(a.d_birth, release_days) - 1, 0),
                                           width_bucket(a.os_major, release_os) - 1)
                           END AS r_birth,
                           width_bucket(a.os_major, release_os) - 1 AS r_os
                    FROM (
                        -- The install's traits (hashes of k) and the event's time.
                        SELECT p.k, p.first_sighting, p.u_type, p.u_recorded,
                               start_at + p.f * span AS occurred_at,
                               p.f * span_days AS d,
                               CASE WHEN p.k < n_old THEN 0 ELSE (p.k - n_old + 0.5) / n_new * span_days END AS d_birth,
                               CASE WHEN h.u_os < 0.06 THEN 15 WHEN h.u_os < 0.22 THEN 16 WHEN h.u_os < 0.60 THEN 17 ELSE 18 END
                                   AS os_major,
                               (CASE WHEN h.u_os < 0.06 THEN '15.' WHEN h.u_os < 0.22 THEN '16.' WHEN h.u_os < 0.60 THEN '17.'
                                     ELSE '18.' END) || (h.h_minor % 6) AS os_version,
                               (ARRAY['en', 'en', 'en', 'en-US', 'en-GB', 'de', 'de', 'fr', 'es', 'ja', 'pt-BR', 'it'])
                                   [1 + h.h_locale % 12] AS locale,
                               CASE WHEN h.u_class < 0.55 THEN -ln(1 - h.u_delay) * 2
                                    WHEN h.u_class < 0.90 THEN 1 - ln(1 - h.u_delay) * 8
                                    ELSE 1e6 END AS delay
                        FROM (
                            -- First sightings of existing installs: k in order over the first tenth.
                            SELECT k, 0.1 * (k + 0.5) / n_old AS f, false AS first_sighting,
                                   random() AS u_type, random() AS u_recorded
                            FROM generate_series(greatest(floor(lo / old_share * n_old)::bigint - 1, 0),
                                                 least(ceil(hi / old_share * n_old)::bigint + 1, n_old - 1)) AS k
                            WHERE 0.1 * (k + 0.5) / n_old >= lo AND 0.1 * (k + 0.5) / n_old < hi
                            UNION ALL
                            -- New installs: installed and first seen at an even pace.
                            SELECT n_old + j, (j + 0.5) / n_new, true, random(), random()
                            FROM generate_series(greatest(floor(lo * n_new)::bigint - 1, 0),
                                                 least(ceil(hi * n_new)::bigint + 1, n_new - 1)) AS j
                            WHERE (j + 0.5) / n_new >= lo AND (j + 0.5) / n_new < hi
                            UNION ALL
                            -- Every other event: an even pace, on an install installed by then.
                            SELECT least(floor(random() * (n_old + n_new * x.f))::bigint, n_installs - 1), x.f, false,
                                   random(), random()
                            FROM (
                                SELECT (i + random()) / n_rest AS f
                                FROM generate_series(chunk * n_rest / chunks, (chunk + 1) * n_rest / chunks - 1) AS i
                                OFFSET 0
                            ) AS x
                            OFFSET 0
                        ) AS p
                        CROSS JOIN LATERAL (
                            SELECT (hashint8extended(p.k, 11) & 4294967295)::float8 / 4294967296 AS u_os,
                                   (hashint8extended(p.k, 12) & 4294967295)::float8 / 4294967296 AS u_class,
                                   (hashint8extended(p.k, 13) & 4294967295)::float8 / 4294967296 AS u_delay,
                                   hashint8extended(p.k, 14) & 65535 AS h_minor,
                                   hashint8extended(p.k, 15) & 65535 AS h_locale
                        ) AS h
                        OFFSET 0
                    ) AS a
                    OFFSET 0
                ) AS t
                OFFSET 0
            ) AS w
            OFFSET 0
        ) AS v
        OFFSET 0
    ) AS s;
    GET DIAGNOSTICS inserted = ROW_COUNT;
    RETURN inserted;
END;
$fn$;

\timing on
-- One statement, and so one transaction, per chunk: this job's share of them.
SELECT format('SELECT %s AS chunk, pg_temp.bench_load_chunk(%s, %s, %s, %s, %L, to_timestamp(%s), %L, %L) AS events',
              c, c, :chunks, :events, :installs, :'app', :end_epoch, :'release_days', :'release_os')
FROM generate_series(0, :chunks - 1) AS c
WHERE c % :jobs = :job
\gexec
\timing off
