#!lua flags=no-writes
-- Read a count (Redisson's RSemaphore.availablePermits, RCountDownLatch.getCount: a GET),
-- refusing a key that holds something else.
-- no-writes: it writes nothing, so it runs when Redis is full, too.
-- KEYS[1] the count
-- Returns the count as Redis keeps it, a decimal string ("0" when absent, as Redisson reads
-- a missing key); NOTALOCK when the key holds something else.
local found, text = count_at(KEYS[1])
if found == false then
    return not_a_count(KEYS[1])
end
return text or '0'
