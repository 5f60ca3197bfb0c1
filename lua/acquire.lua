-- Acquire or re-enter a reentrant lock (Redisson RLock layout).
-- KEYS[1] lock hash
-- ARGV[1] lease in milliseconds
-- ARGV[2] owner field "<client-uuid>:<task-id>"
-- Returns nil when acquired (the owner's count went up by one and the lease was reset),
-- otherwise the holder's PTTL in milliseconds (-1 when the holder set no expiry).
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
return redis.call('pttl', KEYS[1])
