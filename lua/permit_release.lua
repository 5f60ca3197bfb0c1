#!lua flags=allow-oom
-- Release one permit of an expirable semaphore by its id (Redisson
-- RPermitExpirableSemaphore.tryRelease(id), 3.52): if the id is there, remove it, give
-- its permit back and tell the waiters the new count.
-- allow-oom: see unlock.lua; a release must work when Redis is full.
-- KEYS[1] the count
-- KEYS[2] the permits' expiries
-- ARGV[1] channel
-- ARGV[2] publish command
-- ARGV[3] the permit's id, 16 raw bytes
-- Returns 1 when released before its expiry; 2 when its expiry had passed (given back all
-- the same, as Redisson does, which answers false); 0 when the id is not there;
-- NOTALOCK (nothing written) when a key holds something else.
local shape = permits_shape_error(KEYS[1], KEYS[2])
if shape then
    return shape
end
local expiry = redis.call('zscore', KEYS[2], ARGV[3])
if not expiry then
    return 0
end
local now = server_now()
local value = (count_at(KEYS[1]) or 0) + 1
-- Told first: a refused PUBLISH fails the call before anything is written.
redis.call(ARGV[2], ARGV[1], string.format('%.0f', value))
redis.call('zrem', KEYS[2], ARGV[3])
redis.call('incrby', KEYS[1], 1)
if tonumber(expiry) <= now then
    return 2
end
return 1
