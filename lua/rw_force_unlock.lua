#!lua flags=allow-oom
-- Delete a read-write lock held in one mode, whoever holds it, with its read holds'
-- timeout keys, and tell the waiters (Redisson's RedissonReadLock/RedissonWriteLock
-- forceUnlock: the read lock's deletes a lock held for reading, the write lock's one held
-- for writing). allow-oom: see unlock.lua.
-- KEYS[1] lock hash
-- ARGV[1] unlock channel, `redisson_rwlock:{K}`
-- ARGV[2] unlock message: "0" for the read lock, "1" for the write lock, as Redisson
-- ARGV[3] publish command: "publish", or "spublish" with sharded pub/sub
-- ARGV[4] the mode to delete: "read" or "write"
-- ARGV[5] `{K}`: the head of every reader's timeout keys
-- ARGV[6..] optional: the holders the caller saw (the writer's field with its `:write`),
--           to free the lock only if it is still held in this mode by exactly them (see
--           expects_holders in lock_common.lua)
-- Returns 1 when a lock was deleted, 0 when there was none in that mode; with ARGV[6..],
-- the holders_changed reply when the lock is not held as the caller saw it (nothing
-- changed). Fails with NOTALOCK, writing nothing, when the key holds anything but a
-- read-write lock.
local mode = rw_mode(KEYS[1])
if mode == nil then
    return not_a_lock(KEYS[1])
end
if expects_holders(6)
    and ((mode ~= 'none' and mode ~= ARGV[4]) or not held_as_seen(KEYS[1], 6)) then
    return holders_changed(KEYS[1])
end
if mode ~= ARGV[4] then
    return 0
end
-- Published first: a refused PUBLISH fails the call before anything is deleted.
redis.call(ARGV[3], ARGV[1], ARGV[2])
local fields = redis.call('hgetall', KEYS[1])
for i = 1, #fields, 2 do
    local field, count = fields[i], tonumber(fields[i + 1])
    if count and string.sub(field, -6) ~= ':write' then
        for n = 1, count do
            redis.call('del', ARGV[5] .. ':' .. field .. ':rwlock_timeout:' .. n)
        end
    end
end
redis.call('del', KEYS[1])
return 1
