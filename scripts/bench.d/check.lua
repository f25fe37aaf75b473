-- wrk script for `scripts/bench check`: GET requests of the check benchmark (docs/BENCHMARKS.md,
-- "Performance targets").
--
--   wrk ... -s check.lua URL -- MODE [PACE_MS]
--
-- MODE:
--   fixed    every request is GET URL as given (cases (a) and (b): nginx and the trivial route);
--   vary     URL is .../v1/apps/bench/check; each request carries another platform=ios&version=&os=&locale=
--            (versions of the bench catalog and a few older ones, OS 15.x-18.x, locales with and without
--            region, `_` and `-`), case (c);
--   install  as vary, plus a distinct install=<uuid> per request, case (d);
--   memory   URL is .../v1/apps/bench-notes/check; every other request carries a distinct parameter of
--            about 15 KB that the check ignores, the others a distinct (version, os, locale, previous),
--            case (e).
-- PACE_MS: when given, delay() holds each connection this many milliseconds (on average) between an
-- answer and its next request, for the paced latency runs.
--
-- Every mode calls request() per request, so the load generator does about the same Lua work in (a),
-- (b) and (c): "fixed" returns one prepared request, "vary" cycles through a pool of prepared varied
-- requests (random per thread), "install" formats the request with its install id.
--
-- Install ids are unique per thread and counter, lowercase, in UUID form:
--
--   rrrrrrrr-rrrr-4ttt-vrrr-qqqqqqqqqqqq   (r random, t thread, v variant 8-b, q request counter)
--
-- done() prints one `upshift-bench:` line per figure: requests sent and answered, 2xx and non-2xx
-- answers, the requests still in flight when wrk stopped (sent, never answered: wrk does not count
-- them), latency percentiles, bytes per answer and the first few non-2xx answers.

-- setup(), the per-thread id prefix and the `threads` list are shared with the other bench scripts.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
threads = dofile(here .. "common.lua")

-- What the bench catalog holds (CheckBenchmark.createCatalog in Benchmarks/): 3.0.0 ... 4.9.0, and older
-- installs below the policy's minimum.
local versions = { "2.7.1", "2.9.0", "2.9.4" }
for major = 3, 4 do
    for minor = 0, 9 do table.insert(versions, string.format("%d.%d.0", major, minor)) end
end
local oses = {
    "15.0", "15.2", "15.4", "15.7", "15.8",
    "16.0", "16.1", "16.3", "16.4", "16.6", "16.7",
    "17.0", "17.1", "17.2", "17.3", "17.4", "17.5", "17.6",
    "18.0", "18.1", "18.2", "18.3",
}
local locales = { "en", "en-US", "en_GB", "de", "de-AT", "de_DE", "fr", "fr_FR", "fr-CA", "es", "es-MX", "ja", "pt-BR" }
local pool_size = 1024

-- Everything below runs in each thread's own state. These are globals so that done() can read
-- them with thread:get().
mode = "fixed"
pace_ms = nil

local random = math.random
local floor = math.floor
local format = string.format
local fixed_request = nil
local pool = {}
local next_index = 0
local junk = {}
local memory_locales = { "en", "de", "de_AT", "de-CH", "en_GB", "fr", "ja", "es", "pt-BR", "it" }

function init(args)
    mode = args[1] or "fixed"
    assert(mode == "fixed" or mode == "vary" or mode == "install" or mode == "memory",
        "MODE must be fixed, vary, install or memory")
    pace_ms = tonumber(args[2] or "")
    if pace_ms == nil then delay = nil end
    math.randomseed(seed)
    if mode == "fixed" then
        fixed_request = wrk.format()
        return
    end
    if mode == "memory" then
        for i = 1, 16 do junk[i] = string.rep(string.char(96 + i), 15000) end
        return
    end
    local base = wrk.path .. (wrk.path:find("?", 1, true) and "&" or "?")
    for i = 1, pool_size do
        local path = format("%splatform=ios&version=%s&os=%s&locale=%s", base,
            versions[random(#versions)], oses[random(#oses)], locales[random(#locales)])
        -- "vary" keeps whole requests; "install" keeps paths and appends the install per request.
        pool[i] = mode == "vary" and wrk.format(nil, path) or path
    end
end

function request()
    local counter = requests_sent
    requests_sent = requests_sent + 1
    if fixed_request then return fixed_request end
    if mode == "memory" then
        local tag = format("%s%04x%04x%04x", prefix, floor(counter / 4294967296) % 65536,
            floor(counter / 65536) % 65536, counter % 65536)
        if counter % 2 == 0 then
            return wrk.format(nil, format("%s?platform=ios&version=1.0.0&j%s=%s", wrk.path, tag, junk[counter % 16 + 1]))
        end
        -- Distinct questions: 200 versions below the releases x 100 OS versions x 10 locales x 50 previous.
        local n = floor(counter / 2)
        return wrk.format(nil, format("%s?platform=ios&version=0.%d&os=%d.%d&locale=%s&previous=0.0.%d", wrk.path,
            n % 200, 12 + floor(n / 200) % 10, floor(n / 2000) % 10, memory_locales[floor(n / 20000) % 10 + 1],
            floor(n / 200000) % 50))
    end
    next_index = next_index % pool_size + 1
    if mode == "vary" then return pool[next_index] end
    return wrk.format(nil, format("%s&install=%s%04x%04x%04x", pool[next_index], prefix,
        floor(counter / 4294967296) % 65536, floor(counter / 65536) % 65536, counter % 65536))
end

-- The gap after each answer: uniform in [0.5, 1.5] x PACE_MS so that connections do not march in step,
-- rounded at random to whole milliseconds so that the mean stays PACE_MS.
function delay()
    return whole_ms(pace_ms * (0.5 + random()))
end

function response(status, headers, body)
    count_answer(status, body)
end

-- Runs in the main state after the threads stopped.
function done(summary, latency, requests)
    local totals = { requests_sent = 0, answers_2xx = 0, answers_non_2xx = 0 }
    local statuses_all, sample_text = gather(totals)
    -- wrk calls request() once in thread 0 before it starts, to count pipelined requests, and never
    -- sends that one.
    totals.requests_sent = totals.requests_sent - 1
    local answered = totals.answers_2xx + totals.answers_non_2xx
    local seconds = summary.duration / 1e6
    local out, line = summary_lines()
    line("mode", threads[1]:get("mode"))
    line("pace_ms", threads[1]:get("pace_ms") or "none")
    line("duration_s", format("%.3f", seconds))
    line("requests_sent", totals.requests_sent)
    line("responses", summary.requests)
    line("responses_2xx", totals.answers_2xx)
    line("responses_non_2xx", totals.answers_non_2xx)
    line("requests_in_flight", totals.requests_sent - answered)
    rate_lines(line, summary, totals, seconds)
    line("bytes_per_response", format("%.0f", summary.requests > 0 and summary.bytes / summary.requests or 0))
    latency_lines(line, latency, statuses_all)
    io.write(table.concat(out, "\n"), "\n", sample_text)
end
