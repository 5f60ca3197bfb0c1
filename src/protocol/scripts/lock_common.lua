-- Shared by the lock scripts (prepended at build time, after the script's flags line).

-- Whether `field` is an owner field, `<client-uuid>:<decimal id>`: what this crate and
-- Redisson write into a lock hash.
local function owner_shaped(field)
    return type(field) == 'string' and string.find(field, '^[%x%-]+:%d+$') ~= nil
end

-- Whether the hash at `key` (known to be a hash) is a lock of the reentrant layout: not a
-- Redisson read-write lock (which has a `mode` field), and a field picked at random is an
-- owner field. A hash of other data fails, so that a lock call never takes it over.
local function lock_shaped(key)
    if redis.call('hexists', key, 'mode') == 1 then
        return false
    end
    return owner_shaped(redis.call('hrandfield', key))
end

-- What a key holds, for the shape checks: 'none' when absent.
local function type_of(key)
    return redis.call('type', key)['ok']
end

-- The error a script answers when `key` is not what the lock needs there; nothing was
-- written. The client names the key and what it holds (`Error::NotALock`).
local function not_a_lock(key)
    return redis.error_reply('NOTALOCK ' .. key)
end
