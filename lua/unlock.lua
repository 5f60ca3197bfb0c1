#!lua flags=allow-oom
-- Release one hold of reentrant locks, idempotently (Redisson RLock layout): one hold, or
-- those of concurrent callers of one client in one call.
--
-- allow-oom: a release must work when Redis is full (maxmemory with noeviction), or a lock
-- would stay held until its lease ran out. Without the flag, Redis refuses the first write
-- that may grow memory (HINCRBY of a nested release; see `scriptVerifyOOM` in Redis'
-- script.c). Needs Redis 7.0.
--
-- KEYS[2i - 1] lock hash of release i
-- KEYS[2i] its unlock latch: a retried release returns the first try's result
-- ARGV[1] unlock message ("0")
-- ARGV[2] latch time-to-live in milliseconds
-- ARGV[3] publish command: "publish", or "spublish" with sharded pub/sub (Redisson passes
--         it the same way)
-- ARGV[4i] the lock's unlock channel, told ARGV[1] when the lock becomes free (not a key:
--          a channel needs no key permission)
-- ARGV[4i + 1] lease in milliseconds, re-applied while holds remain; 0 leaves the TTL as it
--              is (undoing an acquire for a caller who left must not shorten another
--              hold's lease)
-- ARGV[4i + 2] owner field "<client-uuid>:<task-id>"
-- ARGV[4i + 3] "1" when this is a retry, whose latch may hold the first try's result; a
--              first try cannot find one, and skips the look-up
-- ARGV[#KEYS * 2 + 4] optional: present when one caller is alone in the call, whose one
--                     reply then comes bare, sparing the client an array to parse
-- Returns one integer per release: -1 when the owner held nothing, 0 when holds remain,
-- 1 when the lock was freed, -4 when the key is not a lock, -5 when the user may not
-- PUBLISH to the channel (nothing written: a lock is never freed without its message).
local replies = {}
for i = 1, #KEYS / 2 do
    local lock, latch = KEYS[2 * i - 1], KEYS[2 * i]
    local channel, lease, owner, retry = ARGV[4 * i], ARGV[4 * i + 1], ARGV[4 * i + 2], ARGV[4 * i + 3]
    local done = retry == '1' and redis.call('get', latch)
    if done then
        replies[i] = tonumber(done)
    else
        -- One HGET instead of Redisson's HEXISTS + HINCRBY: the last hold deletes the key.
        local found = redis.pcall('hget', lock, owner)
        local count = tonumber(found)
        if found == false then
            replies[i] = -1
        elseif count == nil or redis.call('hexists', lock, 'mode') == 1 then
            -- Not a hash, or a read-write lock whose reader field has an owner field's
            -- shape: never released as a reentrant lock.
            replies[i] = -4
        elseif count > 1 then
            redis.call('hincrby', lock, owner, -1)
            if tonumber(lease) > 0 then
                redis.call('pexpire', lock, lease)
            end
            redis.call('set', latch, 0, 'px', ARGV[2])
            replies[i] = 0
        elseif type(redis.pcall(ARGV[3], channel, ARGV[1])) == 'table' then
            -- Told before the delete, which no one can see apart inside one script: a
            -- refused PUBLISH then leaves the lock as it was.
            replies[i] = -5
        else
            redis.call('del', lock)
            redis.call('set', latch, 1, 'px', ARGV[2])
            replies[i] = 1
        end
    end
end
if ARGV[#KEYS * 2 + 4] then
    return replies[1]
end
return replies
