#!lua flags=allow-oom
-- Set a count that is not there yet, and tell the waiters (Redisson's
-- RSemaphore.trySetPermits, RPermitExpirableSemaphore.trySetPermits and
-- RCountDownLatch.trySetCount).
-- allow-oom: see unlock.lua; this opens a gate that waiters may be stuck behind.
-- KEYS[1] the count
-- ARGV[1] the count to set
-- ARGV[2] channel (not a key: a channel needs no key permission)
-- ARGV[3] publish command: "publish", or "spublish" with sharded pub/sub
-- ARGV[4] message: the permits for a semaphore, "1" (a new count) for a latch, as Redisson
--         sends them
-- Returns 1 when set, 0 when a count was there already; NOTALOCK (nothing written) when the
-- key holds something else.
local found = count_at(KEYS[1])
if found == false then
    return not_a_count(KEYS[1])
end
if found ~= nil then
    return 0
end
-- Told first: a refused PUBLISH fails the call before anything is written.
redis.call(ARGV[3], ARGV[2], ARGV[4])
redis.call('set', KEYS[1], ARGV[1])
return 1
