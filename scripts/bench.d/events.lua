-- wrk script for `scripts/bench ingest`: POST /v1/events with N new events per request.
--
--   UPSHIFT_BENCH_KEY=<ingest key> wrk ... -s events.lua http://HOST:PORT/v1/events -- N [UNANSWERED_FILE]
--
-- Every event id is unique: a per-thread random prefix (with the thread's index in it, so two threads
-- never share one), then a per-thread request counter, then the event's index in the request:
--
--   rrrrrrrr-rrrr-4ttt-vrrr-qqqqqqqqiiii   (r random, t thread, v variant 8-b, q request, i index)
--
-- The first 32 characters name the request. done() prints one `upshift-bench:` line per figure and
-- writes the names of the requests that got no 2xx answer (still in flight when wrk stopped, timed out,
-- or answered non-2xx) to UNANSWERED_FILE, one a line, so that the caller can tell exactly which stored
-- rows were acknowledged.

-- setup(), the per-thread id prefix and the `threads` list are shared with the other bench scripts.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
threads = dofile(here .. "common.lua")

-- Everything below runs in each thread's own state. These are globals so that done() can read
-- them with thread:get().
per_request = 100
unanswered_file = nil
event_format = nil
pending = {}         -- request name -> true, until a 2xx answer names it
acked_requests = 0
events_accepted = 0
events_duplicate = 0
events_rejected = 0
answers_unmatched = 0

function init(args)
    per_request = tonumber(args[1] or "100") or 100
    unanswered_file = args[2]
    math.randomseed(seed)
    local key = os.getenv("UPSHIFT_BENCH_KEY")
    assert(key and key ~= "", "set UPSHIFT_BENCH_KEY to an ingest key")
    wrk.method = "POST"
    wrk.headers["Authorization"] = "Bearer " .. key
    wrk.headers["Content-Type"] = "application/json"
    -- "Now" once per thread: the server accepts up to 30 days back, so it stays valid for the run.
    local occurred = os.date("!%Y-%m-%dT%H:%M:%SZ")
    event_format = '{"id":"%s%s%04x","type":"launched","occurredAt":"' .. occurred ..
        '","installId":"%04x%04x-%04x-4%03x-%04x-%04x%04x%04x","platform":"ios","appVersion":"1.8.0",' ..
        '"osVersion":"17.4","locale":"en"}'
end

local random = math.random
local format = string.format

function request()
    local counter = requests_sent
    requests_sent = requests_sent + 1
    local name_tail = format("%04x%04x", math.floor(counter / 65536) % 65536, counter % 65536)
    pending[prefix .. name_tail] = true
    local events = {}
    for i = 1, per_request do
        events[i] = format(event_format, prefix, name_tail, i - 1,
            random(0, 65535), random(0, 65535), random(0, 65535), random(0, 4095),
            0x8000 + random(0, 16383), random(0, 65535), random(0, 65535), random(0, 65535))
    end
    return wrk.format(nil, nil, nil, '{"events":[' .. table.concat(events, ",") .. "]}")
end

function response(status, headers, body)
    if not count_answer(status, body) then return end
    local id = body:match('"id"%s*:%s*"(%x+%-%x+%-%x+%-%x+%-%x+)"')
    local name = id and id:sub(1, 32)
    if name and pending[name] then
        pending[name] = nil
        acked_requests = acked_requests + 1
    else
        answers_unmatched = answers_unmatched + 1
    end
    events_accepted = events_accepted + (tonumber(body:match('"accepted"%s*:%s*(%d+)')) or 0)
    events_duplicate = events_duplicate + (tonumber(body:match('"duplicates"%s*:%s*(%d+)')) or 0)
    events_rejected = events_rejected + (tonumber(body:match('"rejected"%s*:%s*(%d+)')) or 0)
end

-- Runs in the main state after the threads stopped.
function done(summary, latency, requests)
    local totals = {
        requests_sent = 0, answers_2xx = 0, answers_non_2xx = 0, answers_unmatched = 0, acked_requests = 0,
        events_accepted = 0, events_duplicate = 0, events_rejected = 0,
    }
    local unanswered = {}
    local statuses_all, sample_text = gather(totals, function(thread)
        -- wrk calls request() once in thread 0 before it starts, to count pipelined requests, and
        -- never sends that one: drop it (thread 0, request counter 0).
        local phantom = thread:get("thread_index") == 0 and thread:get("prefix") .. "00000000" or nil
        for name, _ in pairs(thread:get("pending") or {}) do
            if name == phantom then
                totals.requests_sent = totals.requests_sent - 1
            else
                table.insert(unanswered, name)
            end
        end
    end)
    local seconds = summary.duration / 1e6
    -- init() ran in the threads' states, not in this one: read its settings from a thread.
    local per = tonumber(threads[1]:get("per_request")) or 0
    local unanswered_path = threads[1]:get("unanswered_file")
    local out, line = summary_lines()
    line("events_per_request", per)
    line("duration_s", format("%.3f", seconds))
    line("requests_sent", totals.requests_sent)
    line("responses", summary.requests)
    line("responses_2xx", totals.answers_2xx)
    line("responses_non_2xx", totals.answers_non_2xx)
    line("responses_2xx_unmatched", totals.answers_unmatched)
    line("requests_unanswered", #unanswered)
    line("events_accepted", totals.events_accepted)
    line("events_duplicate", totals.events_duplicate)
    line("events_rejected", totals.events_rejected)
    rate_lines(line, summary, totals, seconds)
    line("events_per_s", format("%.1f", totals.events_accepted / seconds))
    latency_lines(line, latency, statuses_all)
    io.write(table.concat(out, "\n"), "\n", sample_text)
    if unanswered_path then
        local file = assert(io.open(unanswered_path, "w"))
        for _, name in ipairs(unanswered) do file:write(name, "\n") end
        file:close()
    end
end
