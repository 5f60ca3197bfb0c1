#!lua flags=allow-oom
-- Release one read hold of a read-write lock, idempotently (Redisson RReadWriteLock
-- layout). allow-oom: see unlock.lua.
-- KEYS[1] lock hash
-- KEYS[2] unlock latch of this request: a retried release returns the first try's result
-- KEYS[3] prefix of the owner's timeout keys, `{K}:<owner>:rwlock_timeout`
-- ARGV[1] unlock channel, `redisson_rwlock:{K}`
-- ARGV[2] unlock message ("0": wakes one waiter, a writer)
-- ARGV[3] publish command: "publish", or "spublish" with sharded pub/sub
-- ARGV[4] latch time-to-live in milliseconds
-- ARGV[5] lease in milliseconds, re-applied to the owner's remaining read holds; 0 leaves
--         the leases as they are
-- ARGV[6] owner field "<client-uuid>:<task-id>"
-- ARGV[7] "1" when this is a retry, whose latch may hold the first try's result
-- ARGV[8] `{K}`: the head of every reader's timeout keys
-- The hold's timeout key goes, then the hash's lease becomes the longest of the remaining
-- read holds' (never shorter than it was while the writer holds it). When no live read
-- hold remains and nobody writes, the lock is freed: the message first, then the delete.
-- Returns -1 when the owner held nothing, 0 when it holds more, 1 when that was its last
-- hold (and the lock was freed if nobody else held it), -4 when the key is not a
-- read-write lock, -5 when the user may not publish (nothing written).
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
local owner, lease = ARGV[6], tonumber(ARGV[5])
local count = mode ~= 'none' and tonumber(redis.call('hget', KEYS[1], owner))
if not count then
    return -1
end
local left = count - 1
local reapply = lease > 0 and left > 0
-- Read first, write after: a refused PUBLISH must leave everything as it was.
local longest
if reapply then
    longest = math.max(longest_read(KEYS[1], ARGV[8], owner, 0), lease)
else
    longest = longest_read(KEYS[1], ARGV[8], owner, left)
end
local frees = mode == 'read' and longest <= 0
if frees and type(redis.pcall(ARGV[3], ARGV[1], ARGV[2])) == 'table' then
    return -5
end
redis.call('del', KEYS[3] .. ':' .. count)
if frees then
    redis.call('del', KEYS[1])
else
    if left > 0 then
        redis.call('hincrby', KEYS[1], owner, -1)
    else
        redis.call('hdel', KEYS[1], owner)
    end
    if reapply then
        for n = 1, left do
            redis.call('set', KEYS[3] .. ':' .. n, 1, 'px', lease)
        end
    end
    if longest > 0 then
        if mode == 'write' then
            longest = math.max(longest, redis.call('pttl', KEYS[1]))
        end
        redis.call('pexpire', KEYS[1], longest)
    end
end
local released = 0
if frees or left == 0 then
    released = 1
end
redis.call('set', KEYS[2], released, 'px', ARGV[4])
return released
