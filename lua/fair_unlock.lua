#!lua flags=allow-oom
-- Release one hold of a fair lock, so that a retried release never releases a second hold;
-- the final release wakes the queue's head alone. allow-oom: see unlock.lua, whose header
-- also sets out how a retry recognises its own earlier try without a latch (ARGV[6], ARGV[7]).
-- KEYS[1] lock hash
-- KEYS[2] waiting queue
-- KEYS[3] waiter deadlines
-- ARGV[1] unlock channel; the head's own channel is this followed by ':<owner>'
-- ARGV[2] unlock message ("0")
-- ARGV[3] publish command: "publish", or "spublish" with sharded pub/sub
-- ARGV[4] lease in milliseconds, re-applied while holds remain; 0 leaves the TTL as it is
-- ARGV[5] owner field "<client-uuid>:<task-id>"
-- ARGV[6] "1" when this is a retry, whose first try may have run; "0" for a first try
-- ARGV[7] expected: the holds the owner should count before this release
-- Returns nil when the owner holds nothing, 0 when holds remain, 1 when the lock was freed,
-- 2 when it was freed and the queue's head did not hear it (the client looks again once
-- the head's grace has passed: see notify_head), -2 when a retry of a last release finds
-- the owner's field gone (an earlier try may have freed the lock: see unlock.lua).
local owner = ARGV[5]
local retry, expected = ARGV[6] == '1', tonumber(ARGV[7])
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
    -- Lost already, or freed by an earlier try of this release; if the lock is free, make
    -- sure the queue does not stall on it. (Not alone, `queued` stayed true: `now` is set.)
    if redis.call('exists', KEYS[1]) == 0 then
        notify_head(KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3], now)
    end
    forget_empty_queue(KEYS[2], KEYS[3])
    if retry and expected == 1 then
        return -2
    end
    return nil
end
if retry and tonumber(redis.call('hget', KEYS[1], owner)) < expected then
    -- An earlier try of this release ran: answer as it did.
    return 0
end
local remaining = redis.call('hincrby', KEYS[1], owner, -1)
if queued then
    forget_empty_queue(KEYS[2], KEYS[3])
end
if remaining > 0 then
    if tonumber(ARGV[4]) > 0 then
        redis.call('pexpire', KEYS[1], ARGV[4])
    end
    return 0
end
-- The head is told before the delete (one script: nobody sees them apart), so that a
-- refused PUBLISH fails the release with the lock still held, not freed in silence.
local freed = 1
if queued and notify_head(KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3], now) then
    freed = 2
end
redis.call('del', KEYS[1])
return freed
