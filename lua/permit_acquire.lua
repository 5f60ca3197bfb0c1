-- Take permits of an expirable semaphore if enough are free, each with its own id and
-- expiry (Redisson RPermitExpirableSemaphore.tryAcquire, 3.52).
-- KEYS[1] the count
-- KEYS[2] the permits' expiries, `{name}:timeout`
-- ARGV[1] channel
-- ARGV[2] publish command
-- ARGV[3] lease in milliseconds
-- ARGV[4] the score of a permit without expiry (922337203685477, Redisson's)
-- ARGV[5..] the new permits' ids, 16 raw bytes each
-- Returns {1, 0} when taken; {0, ms} when not, with the time until the nearest expiry
-- (-1: no permit will expire); NOTALOCK (nothing written) when a key holds something else.
local shape = permits_shape_error(KEYS[1], KEYS[2])
if shape then
    return shape
end
local wanted = #ARGV - 4
local now = server_now()
-- As Redisson: only as many expired permits as this call wants are given back first.
reclaim(KEYS[1], KEYS[2], now, wanted, ARGV[1], ARGV[2])
local value = count_at(KEYS[1])
if value ~= nil and value >= wanted then
    redis.call('decrby', KEYS[1], wanted)
    local expiry = string.format('%.0f', now + tonumber(ARGV[3]))
    for i = 5, #ARGV do
        redis.call('zadd', KEYS[2], expiry, ARGV[i])
    end
    local ttl = redis.call('pttl', KEYS[1])
    if ttl > 0 then
        redis.call('pexpire', KEYS[2], ttl)
    end
    return {1, 0}
end
local nearest = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if nearest[1] ~= nil and tonumber(nearest[2]) ~= tonumber(ARGV[4]) then
    return {0, math.max(tonumber(nearest[2]) - now, 0)}
end
return {0, -1}
