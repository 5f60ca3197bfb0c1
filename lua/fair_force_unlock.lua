-- Delete a fair lock whoever holds it, and wake the queue's head.
-- KEYS[1] lock hash
-- KEYS[2] waiting queue
-- KEYS[3] waiter deadlines
-- KEYS[4] unlock channel; the head's own channel is this followed by ':<owner>'
-- ARGV[1] unlock message ("0")
-- Returns 1 when a lock was deleted, 0 when there was none.
purge(KEYS[2], KEYS[3], server_now())
local deleted = redis.call('del', KEYS[1])
-- Free either way now: a queue that stalled on a free lock is told too.
notify_head(KEYS[2], KEYS[4], ARGV[1])
return deleted
