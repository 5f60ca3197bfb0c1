-- Set a taken permit's lease anew, counted from now (Redisson
-- RPermitExpirableSemaphore.updateLeaseTime(id, lease), 3.52 and 4.x): expired permits are
-- given back first, as Redisson's does, so a permit whose lease ran out is not revived.
-- KEYS[1] the count
-- KEYS[2] the permits' expiries
-- ARGV[1] channel
-- ARGV[2] publish command
-- ARGV[3] the permit's id, 16 raw bytes
-- ARGV[4] the new lease in milliseconds
-- Returns 1 when the permit was taken and its lease set; 0 when it is not taken (released,
-- given back, never taken); NOTALOCK (nothing written) when a key holds something else.
local shape = permits_shape_error(KEYS[1], KEYS[2])
if shape then
    return shape
end
local now = server_now()
reclaim(KEYS[1], KEYS[2], now, -1, ARGV[1], ARGV[2])
if not redis.call('zscore', KEYS[2], ARGV[3]) then
    return 0
end
redis.call('zadd', KEYS[2], string.format('%.0f', now + tonumber(ARGV[4])), ARGV[3])
return 1
