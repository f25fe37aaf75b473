-- wrk script for `scripts/bench projections`, live lag: POST /v1/events at a steady rate.
--
--   UPSHIFT_BENCH_KEY=<ingest key> wrk -t THREADS ... -s projections-events.lua http://HOST:PORT/v1/events \
--       -- EVENTS_PER_REQUEST REQUESTS_PER_S THREADS INSTALLS_FILE
--
-- Paced: each thread sends REQUESTS_PER_S / THREADS requests per second on a fixed schedule (delay()
-- waits for the thread's next slot on a monotonic clock, whichever of its connections is free), so the
-- rate holds whatever the latency; after a stall it catches up by at most one second's worth of
-- requests. Connections only need to outnumber the requests in flight.
--
-- Events are of the installs in INSTALLS_FILE (one `install_id,version,os_version,locale,offer` a line,
-- offer being the newest release the install's OS runs), occurredAt = now (milliseconds), and mostly
-- `launched`; an install behind its offer also sends prompt_shown (4%), prompt_dismissed (2%),
-- update_started (1%) and updated (2%: from then on it runs the offer). Event ids are unique: a
-- per-thread random prefix, the thread's request counter and the event's index in the request:
--
--   rrrrrrrr-rrrr-4ttt-vrrr-qqqqqqqqiiii   (r random, t thread, v variant 8-b, q request, i index)
--
-- done() prints one `upshift-bench:` line per figure: requests sent, answered 2xx and non-2xx, in flight
-- when wrk stopped (sent, never answered), events accepted / duplicate / rejected as the answers count
-- them, the achieved rates, latency percentiles and the first few non-2xx answers.

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
threads = dofile(here .. "common.lua")

local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } upshift_bench_timespec;
int clock_gettime(int clock_id, upshift_bench_timespec *tp);
]]
local CLOCK_REALTIME, CLOCK_MONOTONIC = 0, 1
local timespec = ffi.new("upshift_bench_timespec")
local function clock_ms(clock)
    ffi.C.clock_gettime(clock, timespec)
    return tonumber(timespec.tv_sec) * 1000 + tonumber(timespec.tv_nsec) / 1e6
end

-- Per-thread state (globals, so that done() can read them with thread:get()).
per_request = 20
interval_ms = 20
events_accepted = 0
events_duplicate = 0
events_rejected = 0
late_slots = 0       -- slots that were already due when a connection asked (the thread fell behind)

local random = math.random
local floor = math.floor
local format = string.format
local installs = {}
local next_slot = nil

function init(args)
    per_request = tonumber(args[1] or "20") or 20
    local rate = tonumber(args[2] or "100") or 100
    local thread_count = tonumber(args[3] or "1") or 1
    local path = assert(args[4], "INSTALLS_FILE is required")
    interval_ms = 1000 * thread_count / rate
    math.randomseed(seed)
    local key = os.getenv("UPSHIFT_BENCH_KEY")
    assert(key and key ~= "", "set UPSHIFT_BENCH_KEY to an ingest key")
    wrk.method = "POST"
    wrk.headers["Authorization"] = "Bearer " .. key
    wrk.headers["Content-Type"] = "application/json"
    for line in io.lines(path) do
        local id, version, os_version, locale, offer = line:match("^([^,]+),([^,]+),([^,]*),([^,]*),([^,]+)$")
        if id then
            table.insert(installs, { id = id, version = version, os = os_version, locale = locale, offer = offer })
        end
    end
    assert(#installs > 0, "no installs in " .. path)
end

-- The version's minor (the bench's releases are 1.m.0).
local function minor(version) return tonumber(version:match("^%d+%.(%d+)")) or 0 end

local function event(id, occurred, install)
    local head = format('{"id":"%s","occurredAt":"%s","installId":"%s","platform":"ios","osVersion":"%s","locale":"%s",',
        id, occurred, install.id, install.os, install.locale)
    local behind = minor(install.version) < minor(install.offer)
    local u = random()
    if behind and u < 0.04 then
        return head .. format('"type":"prompt_shown","appVersion":"%s","promptKind":"soft","targetVersion":"%s"}',
            install.version, install.offer)
    elseif behind and u < 0.06 then
        return head .. format('"type":"prompt_dismissed","appVersion":"%s","promptKind":"soft","targetVersion":"%s",' ..
            '"dismissAction":"later"}', install.version, install.offer)
    elseif behind and u < 0.07 then
        return head .. format('"type":"update_started","appVersion":"%s","promptKind":"soft","targetVersion":"%s"}',
            install.version, install.offer)
    elseif behind and u < 0.09 then
        local from = install.version
        install.version = install.offer
        return head .. format('"type":"updated","appVersion":"%s","fromVersion":"%s"}', install.version, from)
    end
    return head .. format('"type":"launched","appVersion":"%s"}', install.version)
end

function request()
    local counter = requests_sent
    requests_sent = requests_sent + 1
    local name = format("%s%04x%04x", prefix, floor(counter / 65536) % 65536, counter % 65536)
    local now = clock_ms(CLOCK_REALTIME)
    local seconds = floor(now / 1000)
    local occurred = os.date("!%Y-%m-%dT%H:%M:%S", seconds) .. format(".%03dZ", floor(now - seconds * 1000))
    local events = {}
    for i = 1, per_request do
        events[i] = event(format("%s%04x", name, i - 1), occurred, installs[random(#installs)])
    end
    return wrk.format(nil, nil, nil, '{"events":[' .. table.concat(events, ",") .. "]}")
end

-- The wait until this thread's next slot; the first slots are spread over one interval.
function delay()
    local now = clock_ms(CLOCK_MONOTONIC)
    if next_slot == nil then next_slot = now + random() * interval_ms end
    if next_slot < now - 1000 then next_slot = now - 1000 end
    local wait = next_slot - now
    next_slot = next_slot + interval_ms
    if wait <= 0 then
        late_slots = late_slots + 1
        return 0
    end
    return whole_ms(wait)
end

function response(status, headers, body)
    if not count_answer(status, body) then return end
    events_accepted = events_accepted + (tonumber(body:match('"accepted"%s*:%s*(%d+)')) or 0)
    events_duplicate = events_duplicate + (tonumber(body:match('"duplicates"%s*:%s*(%d+)')) or 0)
    events_rejected = events_rejected + (tonumber(body:match('"rejected"%s*:%s*(%d+)')) or 0)
    if sample_count < 3 and not body:find('"rejected"%s*:%s*0[^%d]') then
        sample_count = sample_count + 1
        samples = samples .. format("upshift-bench: rejected_sample body=%s\n", body:sub(1, 300):gsub("[\r\n]", " "))
    end
end

function done(summary, latency, requests)
    local totals = {
        requests_sent = 0, answers_2xx = 0, answers_non_2xx = 0, events_accepted = 0, events_duplicate = 0,
        events_rejected = 0, late_slots = 0,
    }
    local statuses_all, sample_text = gather(totals)
    -- wrk calls request() once in thread 0 before it starts, to count pipelined requests, and never
    -- sends that one.
    totals.requests_sent = totals.requests_sent - 1
    local per = tonumber(threads[1]:get("per_request")) or 0
    local seconds = summary.duration / 1e6
    local out, line = summary_lines()
    line("events_per_request", per)
    line("duration_s", format("%.3f", seconds))
    line("requests_sent", totals.requests_sent)
    line("responses_2xx", totals.answers_2xx)
    line("responses_non_2xx", totals.answers_non_2xx)
    line("requests_in_flight", totals.requests_sent - totals.answers_2xx - totals.answers_non_2xx)
    line("events_sent", totals.requests_sent * per)
    line("events_accepted", totals.events_accepted)
    line("events_duplicate", totals.events_duplicate)
    line("events_rejected", totals.events_rejected)
    line("late_slots", totals.late_slots)
    rate_lines(line, summary, totals, seconds)
    line("events_per_s", format("%.1f", totals.events_accepted / seconds))
    latency_lines(line, latency, statuses_all)
    io.write(table.concat(out, "\n"), "\n", sample_text)
end
