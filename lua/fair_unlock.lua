#!lua flags=allow-oom
-- Release one hold of a fair lock, idempotently; the final release wakes the queue's head
-- alone. allow-oom: see unlock.lua.
-- KEYS[1] lock hash
-- KEYS[2] waiting queue
-- KEYS[3] waiter deadlines
-- KEYS[4] unlock latch for this request: a retried call returns the first call's result
-- ARGV[1] unlock channel; the head's own channel is this followed by ':<owner>'
-- ARGV[2] unlock message ("0")
-- ARGV[3] publish command: "publish", or "spublish" with sharded pub/sub
-- ARGV[4] lease in milliseconds, re-applied while holds remain; 0 leaves the TTL as it is
-- ARGV[5] owner field "<client-uuid>:<task-id>"
-- ARGV[6] latch time-to-live in milliseconds
-- Returns nil when the owner holds nothing, 0 when holds remain, 1 when the lock was freed,
-- 2 when it was freed and the queue's head did not hear it (the client looks again once
-- the head's grace has passed: see notify_head).
local done = redis.call('get', KEYS[4])
if done ~= false then
    return tonumber(done)
end
local owner = ARGV[5]
local holders, misshapen = fair_holders(KEYS[1])
if misshapen then
    return misshapen
end
-- The common case: the caller holds the lock alone (see fair_holders) and nobody waits
-- (see queue_head): the deadlines key is never touched, and nobody is told.
local alone = #holders == 1 and holders[1] == owner
local queued = true
if alone then
    local head
    head, misshapen = queue_head(KEYS[2])
    queued = head ~= false
    if queued and not misshapen then
        misshapen = deadlines_shape_error(KEYS[3])
    end
else
    misshapen = fair_shape_error(KEYS[1], KEYS[2], KEYS[3])
end
if misshapen then
    return misshapen
end
local now
if queued then
    now = server_now()
    purge(KEYS[2], KEYS[3], now)
end
if not alone and redis.call('hexists', KEYS[1], owner) == 0 then
    -- Lost already; if the lock is free, make sure the queue does not stall on it.
    if redis.call('exists', KEYS[1]) == 0 then
        notify_head(KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3], now)
    end
    forget_empty_queue(KEYS[2], KEYS[3])
    return nil
end
local remaining = redis.call('hincrby', KEYS[1], owner, -1)
if queued then
    forget_empty_queue(KEYS[2], KEYS[3])
end
if remaining > 0 then
    if tonumber(ARGV[4]) > 0 then
        redis.call('pexpire', KEYS[1], ARGV[4])
    end
    redis.call('set', KEYS[4], 0, 'px', ARGV[6])
    return 0
end
-- The head is told before the delete (one script: nobody sees them apart), so that a
-- refused PUBLISH fails the release with the lock still held, not freed in silence.
local freed = 1
if queued and notify_head(KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3], now) then
    freed = 2
end
redis.call('del', KEYS[1])
redis.call('set', KEYS[4], freed, 'px', ARGV[6])
return freed
