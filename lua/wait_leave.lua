-- A wait in the wait registry ended: the owner leaves the lock's waiters, and its record
-- goes if it is of this lock (a later wait of the same owner may have replaced it).
-- KEYS[1] redis_rlock_waiters:{<lock key>} (see wait_join.lua), or
--         redis_rlock_waiting:{<owner field>} (see wait_note.lua)
-- ARGV[1] the owner field, for the first; the lock's key, for the second
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'zset' then
    return redis.call('zrem', KEYS[1], ARGV[1])
elseif kind == 'hash' and redis.call('hget', KEYS[1], 'lock') == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
