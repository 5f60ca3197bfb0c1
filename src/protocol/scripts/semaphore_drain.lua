-- Take every free permit (Redisson RSemaphore.drainPermits): SET the count to 0.
-- KEYS[1] the count
-- Returns the count there was (0 when there was none; negative when permits had been taken
-- away below zero); NOTALOCK when the key holds something else.
local value = count_at(KEYS[1])
if value == false then
    return not_a_count(KEYS[1])
end
if value == nil then
    return 0
end
redis.call('set', KEYS[1], 0)
return value
