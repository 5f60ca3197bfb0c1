#!lua flags=allow-oom
-- Release one write hold of a read-write lock, so that a retried release never releases a
-- second hold (Redisson RReadWriteLock layout). allow-oom: see unlock.lua, whose header
-- also sets out how a retry recognises its own earlier try without a latch (ARGV[6],
-- ARGV[7]).
-- KEYS[1] lock hash
-- ARGV[1] unlock channel, `redisson_rwlock:{K}`
-- ARGV[2] unlock message ("1": wakes every waiter)
-- ARGV[3] publish command: "publish", or "spublish" with sharded pub/sub
-- ARGV[4] lease in milliseconds, re-applied while write holds remain (never shortening
--         the hash's); 0 leaves it as it is
-- ARGV[5] owner field "<client-uuid>:<task-id>:write"
-- ARGV[6] "1" when this is a retry, whose first try may have run; "0" for a first try
-- ARGV[7] expected: the write holds the owner should count before this release
-- ARGV[8] `{K}`: the head of every reader's timeout keys
-- The last write hold frees the lock, or, when the writer's task also holds read holds,
-- leaves it in read mode with the lease of the longest of them. Either way every waiter
-- is told: the readers waiting behind the writer may come in now. (Redisson publishes
-- only when it frees the lock; its readers wait out their TTL bound after a downgrade.)
-- Returns -1 when the owner held nothing, 0 when it holds more, 1 when that was its last
-- write hold, -2 when a retry of a last release finds the owner's field gone (see
-- unlock.lua), -4 when the key is not a read-write lock, -5 when the user may not publish
-- (nothing written).
local mode = rw_mode(KEYS[1])
if mode == nil then
    return -4
end
local retry, expected = ARGV[6] == '1', tonumber(ARGV[7])
local count = mode == 'write' and tonumber(redis.call('hget', KEYS[1], ARGV[5]))
if not count then
    if retry and expected == 1 then
        return -2
    end
    return -1
end
if retry and count < expected then
    -- An earlier try of this release ran: answer as it did.
    return 0
end
if count > 1 then
    redis.call('hincrby', KEYS[1], ARGV[5], -1)
    local lease = tonumber(ARGV[4])
    if lease > 0 then
        redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), lease))
    end
    return 0
end
local longest = longest_read(KEYS[1], ARGV[8], nil, nil)
if type(redis.pcall(ARGV[3], ARGV[1], ARGV[2])) == 'table' then
    return -5
end
if longest > 0 then
    redis.call('hdel', KEYS[1], ARGV[5])
    redis.call('hset', KEYS[1], 'mode', 'read')
    redis.call('pexpire', KEYS[1], longest)
else
    redis.call('del', KEYS[1])
end
return 1
