-- Count an expirable semaphore's permits after giving the expired ones back (Redisson
-- RPermitExpirableSemaphore.availablePermits and acquiredPermits, which write too).
-- KEYS[1] the count
-- KEYS[2] the permits' expiries
-- ARGV[1] channel
-- ARGV[2] publish command
-- ARGV[3] "available" (the free permits) or "acquired" (the permits taken)
-- Returns the count; NOTALOCK (nothing written) when a key holds something else.
local shape = permits_shape_error(KEYS[1], KEYS[2])
if shape then
    return shape
end
reclaim(KEYS[1], KEYS[2], server_now(), -1, ARGV[1], ARGV[2])
if ARGV[3] == 'acquired' then
    return redis.call('zcard', KEYS[2])
end
return count_at(KEYS[1]) or 0
