-- Acquire or re-enter a fenced lock (Redisson RFencedLock layout): the reentrant lock, and
-- a fencing token from a counter that only grows.
-- KEYS[1] lock hash
-- KEYS[2] token counter (no expiry: tokens must grow across every holder, ever)
-- ARGV[1] lease in milliseconds
-- ARGV[2] owner field "<client-uuid>:<task-id>"
-- Returns {1, token} when acquired (or re-entered: every acquire gets a new token, as in
-- Redisson), otherwise {0, holder's PTTL} (-1 when the holder set no expiry).
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, redis.call('incr', KEYS[2])}
end
return {0, redis.call('pttl', KEYS[1])}
