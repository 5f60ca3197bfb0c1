-- Shared by the expirable semaphore's scripts (prepended at build time, after
-- sync_common.lua). Layout (Redisson RPermitExpirableSemaphore, 3.52): the free permits'
-- count at the name, and the taken permits in the sorted set `{name}:timeout`, each id (16
-- random bytes) scored with its expiry in milliseconds since the epoch (922337203685477:
-- none). Every call first gives expired permits back, as Redisson's do.

-- Writes after TIME need effects replication on Redis < 5; a no-op on Redis 7.
if redis.replicate_commands then
    redis.replicate_commands()
end

-- The Redis server's clock in milliseconds: the expiries this crate writes and the ones
-- its calls reclaim are read on it, never on a client's clock (Redisson uses the clock of
-- the client that calls).
local function server_now()
    local time = redis.call('time')
    return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

-- A NOTALOCK error for the first of the two keys that holds something an expirable
-- semaphore does not keep there, or nil when both fit: checked before anything is written.
local function permits_shape_error(count, timeouts)
    if count_at(count) == false then
        return not_a_count(count)
    end
    local kind = type_of(timeouts)
    if kind ~= 'none' and kind ~= 'zset' then
        return not_a_count(timeouts)
    end
    return nil
end

-- Gives back the permits whose expiry passed, `limit` at most (-1: all), and tells the
-- waiters the new count if it is above 0 (Redisson's prologue of every call).
local function reclaim(count, timeouts, now, limit, channel, publish)
    local expired = redis.call('zrangebyscore', timeouts, 0, now, 'limit', 0, limit)
    if #expired == 0 then
        return
    end
    local value = (count_at(count) or 0) + #expired
    if value > 0 then
        redis.call(publish, channel, string.format('%.0f', value))
    end
    -- In chunks: unpack() takes a few thousand values at most.
    for first = 1, #expired, 1000 do
        redis.call('zrem', timeouts, unpack(expired, first, math.min(first + 999, #expired)))
    end
    redis.call('incrby', count, #expired)
end
