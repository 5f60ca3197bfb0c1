-- Acquire or re-enter a fair lock; only the head of the queue may take a free lock.
-- KEYS[1] lock hash
-- KEYS[2] waiting queue (list of owner fields)
-- KEYS[3] waiter deadlines (zset owner -> ms on the server clock)
-- ARGV[1] unlock channel; a waiter's own channel is this followed by ':<owner>'
-- ARGV[2] unlock message ("0")
-- ARGV[3] publish command: "publish", or "spublish" with sharded pub/sub
-- ARGV[4] lease in milliseconds
-- ARGV[5] owner field "<client-uuid>:<task-id>"
-- ARGV[6] how long a queued waiter keeps its place without refreshing it, in ms
-- ARGV[7] "queue" to join the queue (or refresh the place in it) when the lock is not
--         taken, "try" to leave the queue alone
-- ARGV[8] ms added to the deadline for each waiter ahead in the queue: the
--         `fairLockWaitTimeout` of the Redisson clients sharing the queue, which each of
--         them subtracts from every deadline behind it when it takes the lock or gives up
--         (RedissonFairLock.tryLockInnerAsync, acquireFailedAsync); 0 when none does
-- Returns -3 when acquired afresh (the owner had no count), -6 when re-entered; otherwise how long to wait at most before
-- trying again, in ms: the holder's PTTL (-1 when it has no expiry), or, when the lock is
-- free but another waiter heads the queue, the time until that waiter's deadline, or
-- until its grace ends if nobody hears it (see notify_head).
local owner = ARGV[5]
local holders, misshapen = fair_holders(KEYS[1])
if misshapen then
    return misshapen
end
local free = #holders == 0
local reentry = #holders == 1 and holders[1] == owner
if not (free or reentry) then
    if not lock_shaped(KEYS[1]) then
        return not_a_lock(KEYS[1])
    end
    reentry = redis.call('hexists', KEYS[1], owner) == 1
end
local head
head, misshapen = queue_head(KEYS[2])
if misshapen then
    return misshapen
end
-- Checked on every call, queue or not: a call that would take a free lock refuses one
-- whose deadlines key holds other data rather than leave it beside a lock.
misshapen = deadlines_shape_error(KEYS[3])
if misshapen then
    return misshapen
end
-- Whether anyone was queued: otherwise nothing to purge, tell or forget (see queue_head).
local queued = head ~= false
local now
if queued then
    now = server_now()
    if purge(KEYS[2], KEYS[3], now) > 0 then
        head = redis.call('lindex', KEYS[2], 0)
    end
end
if reentry then
    redis.call('hincrby', KEYS[1], owner, 1)
    redis.call('pexpire', KEYS[1], ARGV[4])
    if queued then
        forget_empty_queue(KEYS[2], KEYS[3])
    end
    return -6
end
local unheard_head = false
if free and head ~= false and head ~= owner then
    -- A hand-over is under way, or its message was lost, or the head is gone: make sure
    -- a head that can hear is told, then look again.
    unheard_head = notify_head(KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3], now)
    head = redis.call('lindex', KEYS[2], 0)
end
if free and (head == false or head == owner) then
    if head == owner then
        redis.call('lpop', KEYS[2])
        redis.call('zrem', KEYS[3], owner, unheard_record(owner))
    end
    redis.call('hset', KEYS[1], owner, 1)
    redis.call('pexpire', KEYS[1], ARGV[4])
    if queued then
        forget_empty_queue(KEYS[2], KEYS[3])
    end
    return -3
end
if ARGV[7] == 'queue' then
    now = now or server_now()
    -- ZADD refreshes the deadline of a waiter already queued, and reports a new one.
    if redis.call('zadd', KEYS[3], place_deadline(KEYS[2], owner, now, ARGV[6], ARGV[8]), owner) == 1 then
        redis.call('rpush', KEYS[2], owner)
    end
    queued = true
end
if queued then
    forget_empty_queue(KEYS[2], KEYS[3])
end
if free then
    local deadline = redis.call('zscore', KEYS[3], head)
    if deadline == false then
        return tonumber(ARGV[6])
    end
    local wait = tonumber(deadline) - now
    if unheard_head then
        -- Back when the head's grace ends, to pass it over if it still does not hear.
        local record = redis.call('zscore', KEYS[3], unheard_record(head))
        if record ~= false then
            wait = math.min(wait, tonumber(record) - UNHEARD_RECORD_MS - now + 1)
        end
    end
    return math.max(1, wait)
end
return redis.call('pttl', KEYS[1])
