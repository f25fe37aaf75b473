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

return threads
