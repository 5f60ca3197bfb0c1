-- Release one hold of a reentrant lock, idempotently (Redisson RLock layout).
-- KEYS[1] lock hash
-- KEYS[2] unlock channel, told "0" when the lock becomes free
-- KEYS[3] unlock latch for this request: a retried call returns the first call's result
-- ARGV[1] unlock message ("0")
-- ARGV[2] lease in milliseconds, re-applied while holds remain; 0 leaves the TTL as it is
--         (undoing an acquire for a caller who left must not shorten another hold's lease)
-- ARGV[3] owner field "<client-uuid>:<task-id>"
-- ARGV[4] latch time-to-live in milliseconds
-- Returns nil when the owner holds nothing, 0 when holds remain, 1 when the lock was freed.
local done = redis.call('get', KEYS[3])
if done ~= false then
    return tonumber(done)
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local remaining = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if remaining > 0 then
    if tonumber(ARGV[2]) > 0 then
        redis.call('pexpire', KEYS[1], ARGV[2])
    end
    redis.call('set', KEYS[3], 0, 'px', ARGV[4])
    return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
redis.call('set', KEYS[3], 1, 'px', ARGV[4])
return 1
