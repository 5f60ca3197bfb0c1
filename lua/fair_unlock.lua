-- Release one hold of a fair lock, idempotently; the final release wakes the queue's head
-- alone.
-- KEYS[1] lock hash
-- KEYS[2] waiting queue
-- KEYS[3] waiter deadlines
-- KEYS[4] unlock channel; the head's own channel is this followed by ':<owner>'
-- KEYS[5] unlock latch for this request: a retried call returns the first call's result
-- ARGV[1] unlock message ("0")
-- ARGV[2] lease in milliseconds, re-applied while holds remain; 0 leaves the TTL as it is
-- ARGV[3] owner field "<client-uuid>:<task-id>"
-- ARGV[4] latch time-to-live in milliseconds
-- Returns nil when the owner holds nothing, 0 when holds remain, 1 when the lock was freed.
local done = redis.call('get', KEYS[5])
if done ~= false then
    return tonumber(done)
end
purge(KEYS[2], KEYS[3], server_now())
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    -- Lost already; if the lock is free, make sure the queue does not stall on it.
    if redis.call('exists', KEYS[1]) == 0 then
        notify_head(KEYS[2], KEYS[4], ARGV[1])
    end
    return nil
end
local remaining = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if remaining > 0 then
    if tonumber(ARGV[2]) > 0 then
        redis.call('pexpire', KEYS[1], ARGV[2])
    end
    redis.call('set', KEYS[5], 0, 'px', ARGV[4])
    return 0
end
redis.call('del', KEYS[1])
notify_head(KEYS[2], KEYS[4], ARGV[1])
redis.call('set', KEYS[5], 1, 'px', ARGV[4])
return 1
