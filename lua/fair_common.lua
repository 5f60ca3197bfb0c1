-- Shared by every fair-lock script (prepended at build time).
-- Layout (Redisson RFairLock): lock hash, waiting queue `redisson_lock_queue:{K}` (a list of
-- owner fields, head first), deadlines `redisson_lock_timeout:{K}` (a zset owner -> ms), and
-- one channel per waiter, `redisson_lock__channel:{K}:<owner>`.

-- Writes after TIME need effects replication on Redis < 5; a no-op on Redis 7.
if redis.replicate_commands then
    redis.replicate_commands()
end

-- The Redis server's clock in milliseconds: every deadline comes from it, never from a
-- client's clock, so clients with skewed clocks agree on who is stale.
local function server_now()
    local time = redis.call('time')
    return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

-- Drops waiters whose deadline passed (they stopped refreshing it: their process died or
-- froze), wherever they stand in the queue, a bounded number per call.
local function purge(queue, timeouts, now)
    local stale = redis.call('zrangebyscore', timeouts, '-inf', now, 'LIMIT', 0, 100)
    for _, waiter in ipairs(stale) do
        redis.call('lrem', queue, 0, waiter)
        redis.call('zrem', timeouts, waiter)
    end
end

-- Tells the queue's head that the lock is free; only the head may take it. A head that
-- nobody hears (PUBLISH reached no subscriber: its process is gone, or its pub/sub
-- connection is reconnecting) steps back behind the first waiter that hears the message,
-- so the hand-over goes on at once; it keeps its place in the queue until its deadline
-- drops it, and a live one that reconnects has lost one turn, not its place.
local function notify_head(queue, channel, message)
    local unheard = {}
    local heard = false
    while #unheard < 16 do
        local head = redis.call('lindex', queue, 0)
        if head == false then
            break
        end
        if redis.call('publish', channel .. ':' .. head, message) > 0 then
            heard = head
            break
        end
        table.insert(unheard, redis.call('lpop', queue))
    end
    for i = #unheard, 1, -1 do
        if heard then
            redis.call('linsert', queue, 'after', heard, unheard[i])
        else
            redis.call('lpush', queue, unheard[i])
        end
    end
end

