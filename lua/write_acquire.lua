-- Acquire or re-enter the write lock of a read-write lock (Redisson RReadWriteLock
-- layout): taken when nobody holds the lock, re-entered by its writer.
-- KEYS[1] lock hash
-- ARGV[1] lease in milliseconds
-- ARGV[2] owner field "<client-uuid>:<task-id>:write"
-- Returns -3 when acquired afresh, -6 when re-entered; otherwise the hash's PTTL (-1 when it has no expiry). A
-- re-entry sets the hash's lease to the longer of the lease and what it had (the writer's
-- own read holds may have longer ones); Redisson adds the lease to what it had instead.
-- Fails with NOTALOCK, writing nothing, when the key holds anything but a read-write lock.
local mode = rw_mode(KEYS[1])
if mode == nil then
    return not_a_lock(KEYS[1])
end
if mode == 'none' then
    redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return -3
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
    return -6
end
return redis.call('pttl', KEYS[1])
