-- Shared by the wrk scripts of scripts/bench: setup() gives every thread an index, a random id prefix
-- (with the thread's index in it, so two threads never share one) and a random seed.
-- Returns the list of threads, which done() walks with thread:get().

local threads = {}
local urandom = nil

-- Per-thread answer counters (globals, so that done() can read them with thread:get()); count_answer()
-- keeps them.
requests_sent = 0
statuses = {}        -- status code -> count
samples = ""         -- the first few non-2xx answers
sample_count = 0
answers_2xx = 0
answers_non_2xx = 0

-- A random integer in [0, 65535] from /dev/urandom (the main state seeds nothing).
local function random16()
    if urandom == nil then urandom = assert(io.open("/dev/urandom", "rb")) end
    local a, b = urandom:read(2):byte(1, 2)
    return a * 256 + b
end

-- Runs in the main state, once per thread, before the threads start.
function setup(thread)
    local index = #threads
    table.insert(threads, thread)
    thread:set("thread_index", index)
    thread:set("prefix", string.format("%04x%04x-%04x-4%03x-%04x-",
        random16(), random16(), random16(), index % 4096, 0x8000 + random16() % 0x4000))
    thread:set("seed", random16() * 65536 + random16())
end

-- Runs in a thread from response(): counts the answer by status, and keeps the first three non-2xx
-- answers as samples. Returns whether the answer was a 2xx. The thread's globals `statuses`,
-- `answers_2xx`, `answers_non_2xx`, `sample_count` and `samples` hold the counts.
function count_answer(status, body)
    statuses[status] = (statuses[status] or 0) + 1
    if status >= 200 and status <= 299 then
        answers_2xx = answers_2xx + 1
        return true
    end
    answers_non_2xx = answers_non_2xx + 1
    if sample_count < 3 then
        sample_count = sample_count + 1
        samples = samples .. string.format("upshift-bench: non_2xx_sample status=%d body=%s\n", status,
            (body or ""):sub(1, 300):gsub("[\r\n]", " "))
    end
    return false
end

-- wrk's timers count whole milliseconds: rounds `ms` up or down at random so that the mean stays exact.
function whole_ms(ms)
    local whole = math.floor(ms)
    if math.random() < ms - whole then whole = whole + 1 end
    return whole
end

-- Runs in the main state from done(): adds up the per-thread counters named in `totals`, the answers
-- by status and the non-2xx samples; `each(thread)`, when given, sees every thread as well.
function gather(totals, each)
    local statuses_all, sample_text = {}, ""
    for _, thread in ipairs(threads) do
        for name, _ in pairs(totals) do
            totals[name] = totals[name] + (thread:get(name) or 0)
        end
        for status, count in pairs(thread:get("statuses") or {}) do
            statuses_all[status] = (statuses_all[status] or 0) + count
        end
        sample_text = sample_text .. (thread:get("samples") or "")
        if each then each(thread) end
    end
    return statuses_all, sample_text
end

-- The summary done() prints: returns the list of lines and line(name, value), which adds one.
function summary_lines()
    local out = {}
    return out, function(key, value) table.insert(out, string.format("upshift-bench: %s=%s", key, tostring(value))) end
end

-- Writes, through line(name, value), wrk's socket errors and the 2xx answers per second.
function rate_lines(line, summary, totals, seconds)
    line("socket_errors", string.format("connect:%d,read:%d,write:%d,timeout:%d",
        summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.timeout))
    line("requests_per_s", string.format("%.1f", totals.answers_2xx / seconds))
end

-- Writes, through line(name, value), the latency percentiles (p50, p95, p99, max) and the answers by status.
function latency_lines(line, latency, statuses_all)
    line("latency_p50_ms", string.format("%.2f", latency:percentile(50) / 1000))
    line("latency_p95_ms", string.format("%.2f", latency:percentile(95) / 1000))
    line("latency_p99_ms", string.format("%.2f", latency:percentile(99) / 1000))
    line("latency_max_ms", string.format("%.2f", latency.max / 1000))
    local codes = {}
    for status, count in pairs(statuses_all) do table.insert(codes, string.format("%d:%d", status, count)) end
    table.sort(codes)
    line("statuses", #codes > 0 and table.concat(codes, ",") or "none")
end

return threads
