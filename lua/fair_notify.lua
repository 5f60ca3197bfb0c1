-- Look again at a free fair lock's queue: drop stale waiters, and tell the head its turn,
-- or pass it over if its grace to subscribe has ended (see notify_head). Sent by a client
-- whose release found the head unheard, once the grace has passed, for queues in which
-- nobody else would look (Redisson's waiters wait for a message or for their deadline).
-- KEYS[1] lock hash
-- KEYS[2] waiting queue
-- KEYS[3] waiter deadlines
-- ARGV[1] unlock channel; the head's own channel is this followed by ':<owner>'
-- ARGV[2] unlock message ("0")
-- ARGV[3] publish command: "publish", or "spublish" with sharded pub/sub
-- Returns 1 when the head still kept its turn unheard, 0 otherwise.
local misshapen = fair_shape_error(KEYS[1], KEYS[2], KEYS[3])
if misshapen then
    return misshapen
end
local now = server_now()
purge(KEYS[2], KEYS[3], now)
local kept = redis.call('exists', KEYS[1]) == 0
    and notify_head(KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3], now)
forget_empty_queue(KEYS[2], KEYS[3])
if kept then
    return 1
end
return 0
