-- A waiter gives up (cancelled, or its wait ran out): it leaves the queue, and if the lock
-- is free the waiter now at the head is told.
-- KEYS[1] lock hash
-- KEYS[2] waiting queue
-- KEYS[3] waiter deadlines
-- KEYS[4] unlock channel; the head's own channel is this followed by ':<owner>'
-- ARGV[1] owner field of the waiter leaving
-- ARGV[2] unlock message ("0")
-- Returns 1 when the waiter was queued, 0 when it was not.
local removed = redis.call('lrem', KEYS[2], 0, ARGV[1])
redis.call('zrem', KEYS[3], ARGV[1])
purge(KEYS[2], KEYS[3], server_now())
if redis.call('exists', KEYS[1]) == 0 then
    notify_head(KEYS[2], KEYS[4], ARGV[2])
end
if removed > 0 then
    return 1
end
return 0
