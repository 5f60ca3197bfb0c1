-- Extend many read-write lock holds in one call (the watchdog's, for read and write
-- holds alike). PEXPIRE never grows memory, so this works when Redis is full too.
-- KEYS[i] lock hash i
-- ARGV[3i - 2] owner field expected in KEYS[i] (a write hold's ends in ":write")
-- ARGV[3i - 1] for a read hold, the prefix of its owner's timeout keys,
--              `{K}:<owner>:rwlock_timeout`, whose keys 1..count get the lease; "" for a
--              write hold
-- ARGV[3i] lease of hold i in milliseconds
-- The hash's lease becomes the longer of the hold's and what it had: other holders may
-- have longer ones (Redisson sets the hold's, and its read renewal re-expires every
-- reader's timeout keys, not only the renewing owner's).
-- Returns one integer per key: 1 when the owner still held it and its leases were reset,
-- 0 when not (expired, force-unlocked, never held, or the key is no read-write lock).
local renewed = {}
for i = 1, #KEYS do
    local key, owner, timeouts, lease = KEYS[i], ARGV[3 * i - 2], ARGV[3 * i - 1], tonumber(ARGV[3 * i])
    -- pcall: a key that is no longer a hash (overwritten by someone) must count as lost
    -- without failing the whole batch.
    local mode = redis.pcall('hget', key, 'mode')
    local count = tonumber(redis.pcall('hget', key, owner))
    if count and (mode == 'read' or mode == 'write') then
        if timeouts ~= '' then
            for n = 1, count do
                redis.call('pexpire', timeouts .. ':' .. n, lease)
            end
        end
        redis.call('pexpire', key, math.max(redis.call('pttl', key), lease))
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
