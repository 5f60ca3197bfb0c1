-- Take every free permit (Redisson RSemaphore.drainPermits): SET the count to 0.
-- KEYS[1] the count
-- KEYS[2] optional: the request's latch (see `latched` in sync_common.lua)
-- ARGV[1] with a latch: its time-to-live in milliseconds
-- Returns the count there was (0 when there was none; negative when permits had been taken
-- away below zero); NOTALOCK when the key holds something else. A retried request answers
-- as its first try did.
local done = latched(KEYS[2])
if done then
    return done
end
local value = count_at(KEYS[1])
if value == false then
    return not_a_count(KEYS[1])
end
if value == nil then
    return 0
end
redis.call('set', KEYS[1], 0)
return latch_answer(KEYS[2], ARGV[1], value)
