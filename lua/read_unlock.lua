#!lua flags=allow-oom
-- Release one read hold of a read-write lock, so that a retried release never releases a
-- second hold (Redisson RReadWriteLock layout). allow-oom: see unlock.lua, whose header
-- also sets out how a retry recognises its own earlier try without a latch (ARGV[6],
-- ARGV[7]).
-- KEYS[1] lock hash
-- KEYS[2] prefix of the owner's timeout keys, `{K}:<owner>:rwlock_timeout`
-- ARGV[1] unlock channel, `redisson_rwlock:{K}`
-- ARGV[2] unlock message ("0": wakes one waiter, a writer)
-- ARGV[3] publish command: "publish", or "spublish" with sharded pub/sub
-- ARGV[4] lease in milliseconds, re-applied to the owner's remaining read holds; 0 leaves
--         the leases as they are
-- ARGV[5] owner field "<client-uuid>:<task-id>"
-- ARGV[6] "1" when this is a retry, whose first try may have run; "0" for a first try
-- ARGV[7] expected: the read holds the owner should count before this release
-- ARGV[8] `{K}`: the head of every reader's timeout keys
-- The hold's timeout key goes, then the hash's lease becomes the longest of the remaining
-- read holds' (never shorter than it was while the writer holds it). When no live read
-- hold remains and nobody writes, the lock is freed: the message first, then the delete.
-- Returns -1 when the owner held nothing, 0 when it holds more, 1 when that was its last
-- hold (and the lock was freed if nobody else held it), -2 when a retry of a last release
-- finds the owner's field gone (see unlock.lua), -4 when the key is not a read-write lock,
-- -5 when the user may not publish (nothing written).
local mode = rw_mode(KEYS[1])
if mode == nil then
    return -4
end
local owner, lease = ARGV[5], tonumber(ARGV[4])
local retry, expected = ARGV[6] == '1', tonumber(ARGV[7])
local count = mode ~= 'none' and tonumber(redis.call('hget', KEYS[1], owner))
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
redis.call('del', KEYS[2] .. ':' .. count)
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
            redis.call('set', KEYS[2] .. ':' .. n, 1, 'px', lease)
        end
    end
    if longest > 0 then
        if mode == 'write' then
            longest = math.max(longest, redis.call('pttl', KEYS[1]))
        end
        redis.call('pexpire', KEYS[1], longest)
    end
end
if frees or left == 0 then
    return 1
end
return 0
