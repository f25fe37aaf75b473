-- wrk script for `scripts/bench memory`, the rate limiters' tables: one request per client address, so
-- that a limiter's table fills with as many clients as the run names.
--
--   UPSHIFT_BENCH_ADDRESSES=N UPSHIFT_BENCH_ADDRESS_BASE=B [UPSHIFT_BENCH_METHOD=POST UPSHIFT_BENCH_BODY=...] \
--   wrk -t T -c C -d D -s memory-addresses.lua URL
--
-- Each request names, in X-Forwarded-For, an IPv6 address of its own /64, with addresses B ... B + N - 1
-- dealt out to the threads in turn (thread t takes B + t, B + t + T, ...); once a thread has named its
-- share it starts its share again, so a run longer than needed adds no client. The server, which trusts
-- 127.0.0.1 as a proxy, counts each /64 as one client: keys of the longest form, "aaaa:bbbb:xxxx:yyyy::/64"
-- (24 bytes). done() prints the addresses named at least once (`addresses`) beside the usual figures.

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
threads = dofile(here .. "common.lua")

local format = string.format
local floor = math.floor

local count = tonumber(os.getenv("UPSHIFT_BENCH_ADDRESSES") or "0") or 0
local base = tonumber(os.getenv("UPSHIFT_BENCH_ADDRESS_BASE") or "0") or 0
local method = os.getenv("UPSHIFT_BENCH_METHOD") or "GET"
local body = os.getenv("UPSHIFT_BENCH_BODY")
local content_type = os.getenv("UPSHIFT_BENCH_CONTENT_TYPE") or "application/json"

-- Per thread: its index, the thread count, and how many of its share it has named.
named = 0
local thread_count = 1
local share = 0

function init(args)
    assert(count > 0, "set UPSHIFT_BENCH_ADDRESSES to the number of client addresses")
    thread_count = tonumber(args[1] or "1") or 1
    share = floor((count - thread_index + thread_count - 1) / thread_count)
end

local function address(n)
    -- Both groups at least 0x1000, so that every key has its full length.
    return format("aaaa:bbbb:%04x:%04x::1", 0x1000 + floor(n / 0xE000), 0x1000 + n % 0xE000)
end

function request()
    requests_sent = requests_sent + 1
    local k = named % share
    if named < share then named = named + 1 end
    local headers = { ["X-Forwarded-For"] = address(base + thread_index + k * thread_count) }
    if body then headers["Content-Type"] = content_type end
    return wrk.format(method, nil, headers, body)
end

function response(status, headers, response_body)
    count_answer(status, response_body)
end

function done(summary, latency, requests)
    local totals = { requests_sent = 0, answers_2xx = 0, answers_non_2xx = 0, named = 0 }
    local statuses_all, sample_text = gather(totals)
    local seconds = summary.duration / 1e6
    local out, line = summary_lines()
    line("duration_s", format("%.3f", seconds))
    line("responses_2xx", totals.answers_2xx)
    line("responses_non_2xx", totals.answers_non_2xx)
    line("addresses", totals.named)
    rate_lines(line, summary, totals, seconds)
    latency_lines(line, latency, statuses_all)
    io.write(table.concat(out, "\n"), "\n", sample_text)
end
