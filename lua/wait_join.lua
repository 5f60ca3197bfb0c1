-- The wait registry (opt-in, this crate's own; Redisson never reads it): a waiter is in the
-- lock's waiters until it refreshes no more. Redis 7.0 has no per-field expiry, so the
-- zset's scores are the expiries and each call drops the lapsed members; the key expires
-- with its last member, so a crashed waiter leaves nothing behind.
-- KEYS[1] redis_rlock_waiters:{<lock key>}, a zset of owner field -> expiry, ms on the
--         server's clock
-- ARGV[1] the waiting owner field (`<client id>:<task id>`)
-- ARGV[2] how long the entry lives unrefreshed, in ms
-- Returns the server's clock, in ms.
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('zremrangebyscore', KEYS[1], '-inf', now)
redis.call('zadd', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
local last = redis.call('zrange', KEYS[1], -1, -1, 'withscores')
redis.call('pexpireat', KEYS[1], last[2])
return now
