#!lua flags=allow-oom
-- Delete a fair lock whoever holds it, and wake the queue's head. Refuses keys that are
-- not a fair lock's. allow-oom: see unlock.lua.
-- KEYS[1] lock hash
-- KEYS[2] waiting queue
-- KEYS[3] waiter deadlines
-- ARGV[1] unlock channel; the head's own channel is this followed by ':<owner>'
-- ARGV[2] unlock message ("0")
-- ARGV[3] publish command: "publish", or "spublish" with sharded pub/sub
-- ARGV[4..] optional: the holders the caller saw, to free the lock only if it is still
--           held by exactly them (see expects_holders in lock_common.lua); none for a free
--           lock whose queue the caller wants looked at
-- Returns 1 when a lock was deleted, 0 when there was none, 2 when one was deleted and the
-- queue's head did not hear it (the client looks again once its grace has passed); with
-- ARGV[4..], the holders_changed reply when the lock is not held as the caller saw it
-- (nothing changed).
local misshapen = fair_shape_error(KEYS[1], KEYS[2], KEYS[3])
if misshapen then
    return misshapen
end
if expects_holders(4) and not held_as_seen(KEYS[1], 4) then
    return holders_changed(KEYS[1])
end
local now = server_now()
purge(KEYS[2], KEYS[3], now)
-- Free either way now: a queue that stalled on a free lock is told too. Told first, so
-- that a refused PUBLISH leaves the lock in place.
local unheard = notify_head(KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3], now)
local deleted = redis.call('del', KEYS[1])
forget_empty_queue(KEYS[2], KEYS[3])
if deleted == 1 and unheard then
    return 2
end
return deleted
