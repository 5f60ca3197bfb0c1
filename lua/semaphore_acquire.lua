-- Take permits of a semaphore if enough are free (Redisson RSemaphore.tryAcquire).
-- KEYS[1] the count
-- KEYS[2] optional: the request's latch (see `latched` in sync_common.lua)
-- ARGV[1] permits, at least 1
-- ARGV[2] with a latch: its time-to-live in milliseconds
-- Returns 1 when taken (DECRBY), 0 when fewer are free (or the semaphore has no count yet);
-- NOTALOCK (nothing written) when the key holds something else. A retried request answers
-- as its first try did.
local done = latched(KEYS[2])
if done then
    return done
end
local value = count_at(KEYS[1])
if value == false then
    return not_a_count(KEYS[1])
end
if value ~= nil and value >= tonumber(ARGV[1]) then
    redis.call('decrby', KEYS[1], ARGV[1])
    return latch_answer(KEYS[2], ARGV[2], 1)
end
return 0
