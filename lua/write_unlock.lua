#!lua flags=allow-oom
-- Release one write hold of a read-write lock, idempotently (Redisson RReadWriteLock
-- layout). allow-oom: see unlock.lua.
-- KEYS[1] lock hash
-- KEYS[2] unlock latch of this request: a retried release returns the first try's result
-- ARGV[1] unlock channel, `redisson_rwlock:{K}`
-- ARGV[2] unlock message ("1": wakes every waiter)
-- ARGV[3] publish command: "publish", or "spublish" with sharded pub/sub
-- ARGV[4] latch time-to-live in milliseconds
-- ARGV[5] lease in milliseconds, re-applied while write holds remain (never shortening
--         the hash's); 0 leaves it as it is
-- ARGV[6] owner field "<client-uuid>:<task-id>:write"
-- ARGV[7] "1" when this is a retry, whose latch may hold the first try's result
-- ARGV[8] `{K}`: the head of every reader's timeout keys
-- The last write hold frees the lock, or, when the writer's task also holds read holds,
-- leaves it in read mode with the lease of the longest of them. Either way every waiter
-- is told: the readers waiting behind the writer may come in now. (Redisson publishes
-- only when it frees the lock; its readers wait out their TTL bound after a downgrade.)
-- Returns -1 when the owner held nothing, 0 when it holds more, 1 when that was its last
-- write hold, -4 when the key is not a read-write lock, -5 when the user may not publish
-- (nothing written).
if ARGV[7] == '1' then
    local done = redis.call('get', KEYS[2])
    if done then
        return tonumber(done)
    end
end
local mode = rw_mode(KEYS[1])
if mode == nil then
    return -4
end
local count = mode == 'write' and tonumber(redis.call('hget', KEYS[1], ARGV[6]))
if not count then
    return -1
end
if count > 1 then
    redis.call('hincrby', KEYS[1], ARGV[6], -1)
    local lease = tonumber(ARGV[5])
    if lease > 0 then
        redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), lease))
    end
    redis.call('set', KEYS[2], 0, 'px', ARGV[4])
    return 0
end
local longest = longest_read(KEYS[1], ARGV[8], nil, nil)
if type(redis.pcall(ARGV[3], ARGV[1], ARGV[2])) == 'table' then
    return -5
end
if longest > 0 then
    redis.call('hdel', KEYS[1], ARGV[6])
    redis.call('hset', KEYS[1], 'mode', 'read')
    redis.call('pexpire', KEYS[1], longest)
else
    redis.call('del', KEYS[1])
end
redis.call('set', KEYS[2], 1, 'px', ARGV[4])
return 1
