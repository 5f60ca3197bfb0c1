-- Acquire or re-enter the read lock of a read-write lock (Redisson RReadWriteLock layout):
-- taken when nobody holds the lock, when it is held for reading, or when the caller's task
-- holds its write lock (a writer may read).
-- KEYS[1] lock hash
-- KEYS[2] prefix of the owner's timeout keys, `{K}:<owner>:rwlock_timeout` (declared, so
--         that ACL key patterns are checked before anything runs)
-- ARGV[1] lease in milliseconds
-- ARGV[2] owner field "<client-uuid>:<task-id>"
-- Returns -3 when acquired afresh (the owner had no count), -6 when re-entered: the owner's count went up by one, and every one of its read
-- holds' timeout keys has the lease (one lease per hold, as a reentrant lock's key has,
-- where Redisson leaves the earlier keys' leases as they were); the hash lives at least as
-- long. Otherwise the hash's PTTL (-1 when it has no expiry). Fails with NOTALOCK, writing
-- nothing, when the key holds anything but a read-write lock.
local mode = rw_mode(KEYS[1])
if mode == nil then
    return not_a_lock(KEYS[1])
end
local owner, lease = ARGV[2], tonumber(ARGV[1])
if mode == 'write' and redis.call('hexists', KEYS[1], owner .. ':write') == 0 then
    return redis.call('pttl', KEYS[1])
end
if mode == 'none' then
    redis.call('hset', KEYS[1], 'mode', 'read')
end
local count = redis.call('hincrby', KEYS[1], owner, 1)
for n = 1, count do
    redis.call('set', KEYS[2] .. ':' .. n, 1, 'px', lease)
end
redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), lease))
return count == 1 and -3 or -6
