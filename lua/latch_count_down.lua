#!lua flags=allow-oom
-- Count a latch down by one (Redisson RCountDownLatch.countDown): DECR; at 0 the key is
-- deleted and "0" told on the channel, which opens the latch for every waiter.
-- allow-oom: see unlock.lua; waiters may be stuck behind this.
-- KEYS[1] the count
-- KEYS[2] optional: the request's latch (see `latched` in sync_common.lua)
-- ARGV[1] channel
-- ARGV[2] publish command
-- ARGV[3] with a latch: its time-to-live in milliseconds
-- Returns the count left (0 once open); NOTALOCK (nothing written) when the key holds
-- something else. A retried request answers as its first try did.
local done = latched(KEYS[2])
if done then
    return done
end
local value = count_at(KEYS[1])
if value == false then
    return not_a_count(KEYS[1])
end
if value == nil then
    -- Redisson's DECR makes -1 of a missing key and deletes it again: nothing changes.
    return 0
end
if value == 1 then
    -- Told first: a refused PUBLISH fails the call before anything is written.
    redis.call(ARGV[2], ARGV[1], '0')
end
local left = redis.call('decr', KEYS[1])
if left <= 0 then
    redis.call('del', KEYS[1])
    left = 0
end
return latch_answer(KEYS[2], ARGV[3], left)
