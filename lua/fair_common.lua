-- Shared by every fair-lock script (prepended at build time, after lock_common.lua).
-- Layout (Redisson RFairLock): lock hash, waiting queue `redisson_lock_queue:{K}` (a list of
-- owner fields, head first), deadlines `redisson_lock_timeout:{K}` (a zset owner -> ms), and
-- one channel per waiter, `redisson_lock__channel:{K}:<owner>`. Every fair script takes
-- the three keys as KEYS[1..3], and the channel prefix, the unlock message and the publish
-- command ('publish', or 'spublish' with sharded pub/sub, as Redisson passes it) as
-- ARGV[1..3] (the heartbeat: the message and the command as ARGV[2] and ARGV[3]).

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

-- The deadline of `owner`'s place in `queue`: `keep` ms from `now`, plus `per_ahead` ms for
-- each waiter ahead of it (all of them when it is not queued yet). A Redisson waiter that
-- takes the lock or gives up subtracts its `fairLockWaitTimeout` from every deadline
-- behind it, once; with `per_ahead` at least that, no such subtraction can put a live
-- waiter's deadline in the past before its next refresh.
local function place_deadline(queue, owner, now, keep, per_ahead)
    per_ahead = tonumber(per_ahead)
    local deadline = now + tonumber(keep)
    if per_ahead > 0 then
        local ahead = redis.call('lpos', queue, owner) or redis.call('llen', queue)
        deadline = deadline + per_ahead * ahead
    end
    return deadline
end


-- The first waiter in the queue that hears its channel (a subscriber on it, so it can be
-- told its turn) and its 0-based index; nil when none of the first 1024 does. Counted with
-- PUBSUB NUMSUB, or PUBSUB SHARDNUMSUB when the message goes out with SPUBLISH; both ignore
-- pattern subscribers such as a monitoring tool's. Both count the subscribers of the node
-- running this script only: on a cluster, waiters subscribe on the master of their
-- channel's slot, which is where this script runs.
local function first_hearer(queue, channel, publish)
    local count = 'numsub'
    if publish == 'spublish' then
        count = 'shardnumsub'
    end
    local start, size = 0, 1
    while start < 1024 do
        local waiters = redis.call('lrange', queue, start, start + size - 1)
        if #waiters == 0 then
            return nil
        end
        local channels = {}
        for i, waiter in ipairs(waiters) do
            channels[i] = channel .. ':' .. waiter
        end
        local counts = redis.call('pubsub', count, unpack(channels))
        for i = 1, #waiters do
            if tonumber(counts[2 * i]) > 0 then
                return start + i - 1, waiters[i]
            end
        end
        -- The head alone is the common case; past it, look further in larger steps.
        start, size = start + size, 64
    end
    return nil
end

-- How long the head of a free lock's queue keeps its turn while nobody hears its channel.
-- Redisson's lock() joins the queue with its first script call and subscribes to its own
-- channel only after that reply (RedissonLock.lock, then RedissonFairLock's
-- tryLockInnerAsync loop), so a live Java waiter can be unheard for a round trip. A head
-- still unheard this long after it was first found so (its process died, or its pub/sub
-- connection is down) is passed over. Short, because a consumer that crashed while queued
-- costs everyone behind it this long.
local UNHEARD_GRACE_MS = 100
-- How long past the grace the record of an unheard head is kept (then the purge drops it).
local UNHEARD_RECORD_MS = 10000

-- The deadlines zset member that records since when `waiter` has headed a free lock's
-- queue unheard: scored `since + UNHEARD_GRACE_MS + UNHEARD_RECORD_MS`, so that the purge
-- drops it once stale. Not an owner field: no client ever queues under this name, and
-- Redisson reads the zset only by owner (its stale-waiter purge walks the queue list).
local function unheard_record(waiter)
    return 'unheard:' .. waiter
end

-- Drops waiters whose deadline passed (they stopped refreshing it: their process died or
-- froze), wherever they stand in the queue, a bounded number per call, each with its
-- unheard record if it has one (records whose own score passed go the same way).
-- Returns how many members it dropped.
local function purge(queue, timeouts, now)
    local stale = redis.call('zrangebyscore', timeouts, '-inf', now, 'LIMIT', 0, 100)
    for _, waiter in ipairs(stale) do
        redis.call('lrem', queue, 0, waiter)
        redis.call('zrem', timeouts, waiter, unheard_record(waiter))
    end
    return #stale
end

-- Deletes the deadlines set once the queue is empty (Redis deletes an empty list): every
-- member left in it then stands for nobody (an unheard record of a waiter that has gone),
-- and nothing else would ever remove it, since a fair lock's queue and deadlines have no
-- TTL (Redisson's layout). Every fair script that may empty the queue, or run on an empty
-- one, ends with this, so that no wait, however it ends, leaves a key behind. (A waiter
-- that crashed while queued stays until a later call on the lock purges it, as in
-- Redisson.)
local function forget_empty_queue(queue, timeouts)
    if redis.call('exists', queue) == 0 then
        redis.call('del', timeouts)
    end
end

-- Tells the head of the queue that the lock is free. A head nobody hears (no subscriber on
-- its channel) is told all the same, as Redisson does, and keeps its turn for
-- UNHEARD_GRACE_MS from the first call that found it so; after that, it and the unheard
-- waiters behind it step back behind the first waiter that hears, in their order, and that
-- one is told: the hand-over goes on. They keep their places otherwise: a dead one until
-- its deadline drops it, a live one that reconnects having lost a turn for each release it
-- missed.
-- Publishes (with `publish`, the command the caller passed) before it writes, and callers
-- call it before they free the lock, so that a message the user may not send fails the
-- script with the lock and the queue as they were.
-- Returns true when an unheard head kept its turn: the caller's client should look again
-- once the grace has passed, should nobody else.
local function notify_head(queue, timeouts, channel, message, publish, now)
    local index, hearer = first_hearer(queue, channel, publish)
    if index == 0 then
        redis.call(publish, channel .. ':' .. hearer, message)
        return false
    end
    local head = redis.call('lindex', queue, 0)
    if head == false then
        return false
    end
    local record = unheard_record(head)
    local expires = redis.call('zscore', timeouts, record)
    if expires == false or now < tonumber(expires) - UNHEARD_RECORD_MS then
        redis.call(publish, channel .. ':' .. head, message)
        if expires == false then
            redis.call('zadd', timeouts, now + UNHEARD_GRACE_MS + UNHEARD_RECORD_MS, record)
        end
        return true
    end
    if index == nil then
        -- Nobody hears at all: the deadlines drop the dead, and a live waiter that
        -- reconnects looks again.
        return false
    end
    redis.call(publish, channel .. ':' .. hearer, message)
    local unheard = {}
    for i = 1, index do
        unheard[i] = redis.call('lpop', queue)
        redis.call('zrem', timeouts, unheard_record(unheard[i]))
    end
    for i = index, 1, -1 do
        redis.call('linsert', queue, 'after', hearer, unheard[i])
    end
    return false
end

-- A NOTALOCK error when the deadlines key holds something else than a zset, or nil.
local function deadlines_shape_error(timeouts)
    local kind = type_of(timeouts)
    if kind ~= 'none' and kind ~= 'zset' then
        return not_a_lock(timeouts)
    end
    return nil
end

-- A NOTALOCK error for the first of a fair lock's keys that holds something a fair lock
-- does not keep there, or nil when they all fit: checked before anything is written.
local function fair_shape_error(lock, queue, timeouts)
    local kind = type_of(lock)
    if kind ~= 'none' and (kind ~= 'hash' or not lock_shaped(lock)) then
        return not_a_lock(lock)
    end
    kind = type_of(queue)
    if kind ~= 'none' and kind ~= 'list' then
        return not_a_lock(queue)
    end
    return deadlines_shape_error(timeouts)
end

-- `command` on `key` (then `...`), as a first read of the key that stands for its type
-- check: a key of another type than the command reads answers nil and the NOTALOCK error
-- instead of failing the script. Only before anything is written, as the checks above.
local function read_or_misshapen(command, key, ...)
    local reply = redis.pcall(command, key, ...)
    if type(reply) == 'table' and reply.err then
        if string.sub(reply.err, 1, 9) == 'WRONGTYPE' then
            return nil, not_a_lock(key)
        end
        -- Any other refusal (an ACL rule) fails the script as redis.call fails it: a
        -- read, so asking again changes nothing.
        return redis.call(command, key, ...)
    end
    return reply
end

-- The fields of the fair lock hash at `lock` when it has at most one (the holder's), or
-- two of them picked at random; an empty table when the lock is free, and nil and the
-- NOTALOCK error when the key is no hash. A hash whose only field is the caller's owner
-- field is a lock's (no read-write lock's `mode`, an owner field): this one read is its
-- shape check. Anything else needs lock_shaped.
local function fair_holders(lock)
    return read_or_misshapen('hrandfield', lock, 2)
end

-- The head of the waiting queue (false when it is empty: Redis deletes an empty list), or
-- nil and the NOTALOCK error when the key is no list. Every fair script ends with
-- forget_empty_queue, and Redisson's keep the deadlines in step with the queue, so an
-- empty queue has no deadlines set either: a call that finds it so and queues nobody has
-- no stale waiter to purge, nobody to tell, and nothing to forget.
local function queue_head(queue)
    return read_or_misshapen('lindex', queue, 0)
end
