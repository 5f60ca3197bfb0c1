-- Release one hold of reentrant locks, idempotently (Redisson RLock layout): one hold, or
-- those of concurrent callers of one client in one call.
-- KEYS[3i - 2] lock hash of release i
-- KEYS[3i - 1] its unlock channel, told "0" when the lock becomes free
-- KEYS[3i] its unlock latch: a retried release returns the first try's result
-- ARGV[1] unlock message ("0")
-- ARGV[2] latch time-to-live in milliseconds
-- ARGV[3i] lease in milliseconds, re-applied while holds remain; 0 leaves the TTL as it is
--          (undoing an acquire for a caller who left must not shorten another hold's
--          lease)
-- ARGV[3i + 1] owner field "<client-uuid>:<task-id>"
-- ARGV[3i + 2] "1" when this is a retry, whose latch may hold the first try's result; a
--              first try cannot find one, and skips the look-up
-- Returns one integer per release: -1 when the owner held nothing, 0 when holds remain,
-- 1 when the lock was freed.
local replies = {}
for i = 1, #KEYS / 3 do
    local lock, channel, latch = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
    local lease, owner, retry = ARGV[3 * i], ARGV[3 * i + 1], ARGV[3 * i + 2]
    local done = retry == '1' and redis.call('get', latch)
    if done then
        replies[i] = tonumber(done)
    else
        -- One HGET instead of Redisson's HEXISTS + HINCRBY: the last hold deletes the key.
        local count = tonumber(redis.call('hget', lock, owner))
        if count == nil then
            replies[i] = -1
        elseif count > 1 then
            redis.call('hincrby', lock, owner, -1)
            if tonumber(lease) > 0 then
                redis.call('pexpire', lock, lease)
            end
            redis.call('set', latch, 0, 'px', ARGV[2])
            replies[i] = 0
        else
            redis.call('del', lock)
            redis.call('publish', channel, ARGV[1])
            redis.call('set', latch, 1, 'px', ARGV[2])
            replies[i] = 1
        end
    end
end
return replies
