#!lua flags=allow-oom
-- Delete a fair lock whoever holds it, and wake the queue's head. Refuses keys that are
-- not a fair lock's. allow-oom: see unlock.lua.
-- KEYS[1] lock hash
-- KEYS[2] waiting queue
-- KEYS[3] waiter deadlines
-- ARGV[1] unlock channel; the head's own channel is this followed by ':<owner>'
-- ARGV[2] unlock message ("0")
-- ARGV[3] publish command: "publish", or "spublish" with sharded pub/sub
-- Returns 1 when a lock was deleted, 0 when there was none.
local misshapen = fair_shape_error(KEYS[1], KEYS[2], KEYS[3])
if misshapen then
    return misshapen
end
purge(KEYS[2], KEYS[3], server_now())
-- Free either way now: a queue that stalled on a free lock is told too. Told first, so
-- that a refused PUBLISH leaves the lock in place.
notify_head(KEYS[2], ARGV[1], ARGV[2], ARGV[3])
return redis.call('del', KEYS[1])
