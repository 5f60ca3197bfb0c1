-- Shared by the semaphore and count-down latch scripts (prepended at build time, after the
-- script's flags line). Redisson's layouts (RSemaphore, RPermitExpirableSemaphore,
-- RCountDownLatch): the count is a string holding a decimal integer at the name.

-- What a key holds, for the shape checks: 'none' when absent.
local function type_of(key)
    return redis.call('type', key)['ok']
end

-- The error a script answers when `key` holds something this kind does not keep there;
-- nothing was written. The client names the key and what it holds (`Error::NotALock`).
local function not_a_count(key)
    return redis.error_reply('NOTALOCK ' .. key)
end

-- The count at `key` as a number, and as Redis keeps it: nil when the key is absent, false
-- when it holds something else (another type, or a string that is no decimal integer of at
-- most 19 digits, which INCRBY and DECR would refuse).
local function count_at(key)
    local kind = type_of(key)
    if kind == 'none' then
        return nil
    end
    if kind ~= 'string' then
        return false
    end
    local text = redis.call('get', key)
    local digits = string.match(text, '^%-?(%d+)$')
    if digits == nil or #digits > 19 then
        return false
    end
    return tonumber(text), text
end

-- The error a script answers when a change would take a count out of `low..high` (what
-- Redisson reads it as: a Java `int` for a semaphore); nothing was written.
local function out_of_range(key, value, low, high)
    return redis.error_reply(string.format(
        'OVERFLOW the count of %s would become %.0f, outside %s..%s', key, value, low, high))
end

-- A count change's request latch (a Redis Cluster or Sentinel client sends one; see
-- src/sync/call.rs):
-- the answer an earlier run of the same request left at `latch`, or nil (also when no
-- latch is given). A retry whose first try ran then answers as that try did, instead of
-- counting a second time.
local function latched(latch)
    if latch == nil then
        return nil
    end
    local answer = redis.call('get', latch)
    if answer then
        return tonumber(answer)
    end
    return nil
end

-- Records `answer` at `latch` for `ttl` ms, in the same script run as the change it
-- answers (so that a replica has both or neither), and returns it. Nothing without a
-- latch.
local function latch_answer(latch, ttl, answer)
    if latch ~= nil then
        redis.call('set', latch, string.format('%.0f', answer), 'px', ttl)
    end
    return answer
end
