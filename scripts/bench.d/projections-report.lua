-- wrk script for `scripts/bench projections`, report latency: GET report URLs again and again.
--
--   UPSHIFT_BENCH_TOKEN=<read token> wrk -t 1 -c 1 ... -s projections-report.lua 'http://HOST:PORT/v1/apps/...'
--
-- UPSHIFT_BENCH_PATHS names a file of paths, one per line: the requests go through them in turn, so that
-- each answer is read afresh (another release, target or window) rather than the same one again; without
-- it the URL's own path is asked. A line `path<TAB>body` is a POST of that JSON body (the policy
-- backtest). UPSHIFT_BENCH_COOKIE (a dashboard session, `name=value`) replaces the token.
-- UPSHIFT_BENCH_RETRY_AFTER=1: a client that honours `Retry-After`, as the SDK and any polite reader do: a
-- `429` or `503` delays that connection's next request by its seconds (wrk asks delay() for the connection
-- whose answer just came, so the delay is that connection's). UPSHIFT_BENCH_PACE_MS=N: each connection waits
-- N ms after each answer (a paced load).
-- done() prints one `upshift-bench:` line per figure: answers (2xx, non-2xx), requests/s, latency
-- p50/p95/p99/max, bytes per answer and the first few non-2xx answers.

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
threads = dofile(here .. "common.lua")

local format = string.format
local prepared = {}
local next_index = 1

local honour_retry_after = os.getenv("UPSHIFT_BENCH_RETRY_AFTER") == "1"
local pending_delay_ms = 0
-- UPSHIFT_BENCH_PACE_MS: each connection waits this long after an answer before its next request.
local pace_ms = tonumber(os.getenv("UPSHIFT_BENCH_PACE_MS") or "0") or 0

function init(args)
    local token = os.getenv("UPSHIFT_BENCH_TOKEN")
    local cookie = os.getenv("UPSHIFT_BENCH_COOKIE")
    if cookie and cookie ~= "" then
        wrk.headers["Cookie"] = cookie
        wrk.headers["Accept"] = "text/html"
    else
        assert(token and token ~= "", "set UPSHIFT_BENCH_TOKEN to a read token (or UPSHIFT_BENCH_COOKIE)")
        wrk.headers["Authorization"] = "Bearer " .. token
        wrk.headers["Accept"] = "application/json"
    end
    local list = os.getenv("UPSHIFT_BENCH_PATHS")
    if list and list ~= "" then
        for line in io.lines(list) do
            local path, body = line:match("^([^\t]*)\t(.*)$")
            if path then
                -- wrk.format takes the headers given in place of wrk.headers: the credentials go along.
                local headers = { ["Content-Type"] = "application/json" }
                for name, value in pairs(wrk.headers) do headers[name] = value end
                prepared[#prepared + 1] = wrk.format("POST", path, headers, body)
            elseif line ~= "" then
                prepared[#prepared + 1] = wrk.format(nil, line)
            end
        end
        assert(#prepared > 0, "UPSHIFT_BENCH_PATHS names an empty file")
    else
        prepared[1] = wrk.format()
    end
end

function request()
    requests_sent = requests_sent + 1
    local request = prepared[next_index]
    next_index = next_index % #prepared + 1
    return request
end

function response(status, headers, body)
    count_answer(status, body)
    if honour_retry_after and (status == 429 or status == 503) then
        local seconds = tonumber(headers["Retry-After"] or headers["retry-after"] or "1") or 1
        pending_delay_ms = seconds * 1000
    end
end

function delay()
    local ms = pending_delay_ms + pace_ms
    pending_delay_ms = 0
    return ms
end

function done(summary, latency, requests)
    local totals = { requests_sent = 0, answers_2xx = 0, answers_non_2xx = 0 }
    local statuses_all, sample_text = gather(totals)
    local seconds = summary.duration / 1e6
    local out, line = summary_lines()
    line("duration_s", format("%.3f", seconds))
    line("responses_2xx", totals.answers_2xx)
    line("responses_non_2xx", totals.answers_non_2xx)
    rate_lines(line, summary, totals, seconds)
    line("bytes_per_response", format("%.0f", summary.requests > 0 and summary.bytes / summary.requests or 0))
    latency_lines(line, latency, statuses_all)
    io.write(table.concat(out, "\n"), "\n", sample_text)
end
