-- Shared by the wrk scripts of scripts/bench: setup() gives every thread an index, a random id prefix
-- (with the thread's index in it, so two threads never share one) and a random seed.
-- Returns the list of threads, which done() walks with thread:get().

local threads = {}
local urandom = nil

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

-- Writes, through line(name, value), the latency percentiles and the answers by status.
function latency_lines(line, latency, statuses_all)
    line("latency_p50_ms", string.format("%.2f", latency:percentile(50) / 1000))
    line("latency_p99_ms", string.format("%.2f", latency:percentile(99) / 1000))
    line("latency_max_ms", string.format("%.2f", latency.max / 1000))
    local codes = {}
    for status, count in pairs(statuses_all) do table.insert(codes, string.format("%d:%d", status, count)) end
    table.sort(codes)
    line("statuses", #codes > 0 and table.concat(codes, ",") or "none")
end

return threads
