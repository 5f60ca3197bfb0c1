#!lua flags=allow-oom
-- A waiter gives up (cancelled, or its wait ran out): it leaves the queue, with its unheard
-- record if a release found it so, and if the lock is free the waiter now at the head is
-- told; the last waiter to leave takes the deadlines set with it. allow-oom: leaving only
-- frees memory, and must work when Redis is full (see unlock.lua).
-- KEYS[1] lock hash
-- KEYS[2] waiting queue
-- KEYS[3] waiter deadlines
-- ARGV[1] unlock channel; the head's own channel is this followed by ':<owner>'
-- ARGV[2] unlock message ("0")
-- ARGV[3] publish command: "publish", or "spublish" with sharded pub/sub
-- ARGV[4] owner field of the waiter leaving
-- Returns 1 when the waiter was queued, 0 when it was not.
local misshapen = fair_shape_error(KEYS[1], KEYS[2], KEYS[3])
if misshapen then
    return misshapen
end
local removed = redis.call('lrem', KEYS[2], 0, ARGV[4])
redis.call('zrem', KEYS[3], ARGV[4], unheard_record(ARGV[4]))
local now = server_now()
purge(KEYS[2], KEYS[3], now)
if redis.call('exists', KEYS[1]) == 0 then
    notify_head(KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3], now)
end
forget_empty_queue(KEYS[2], KEYS[3])
if removed > 0 then
    return 1
end
return 0
