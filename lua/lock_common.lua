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

-- For a force unlock that frees only the holders its caller saw (`rlock unlock`): whether
-- ARGV[from] asks for that. It is then the number n of owner fields the caller saw, given
-- as ARGV[from + 1 .. from + n]; absent or '-' frees whoever holds the lock.
local function expects_holders(from)
    return ARGV[from] ~= nil and ARGV[from] ~= '-'
end

-- The owner fields of the lock hash at `key` (none when it is absent), a read-write lock's
-- `mode` aside. HRANDFIELD with a count at least the hash's size returns every field, and
-- is a command the lock user's ACL rules grant already (HKEYS is not among them).
local function holder_fields(key)
    local fields = {}
    for _, field in ipairs(redis.call('hrandfield', key, 1000000000)) do
        if field ~= 'mode' then
            fields[#fields + 1] = field
        end
    end
    return fields
end

-- Whether the lock at `key` is held by exactly the owner fields the caller saw (see
-- expects_holders), whatever their counts: a holder that re-entered or released a hold
-- meanwhile is still the one the caller saw; any other field, or one missing, is not.
local function held_as_seen(key, from)
    local seen = {}
    local n = tonumber(ARGV[from])
    for i = from + 1, from + n do
        seen[ARGV[i]] = true
    end
    local found = holder_fields(key)
    if #found ~= n then
        return false
    end
    for _, field in ipairs(found) do
        if not seen[field] then
            return false
        end
    end
    return true
end

-- The reply of a force unlock that changed nothing because the lock is no longer held as
-- its caller saw it: 'changed', the `mode` of a read-write lock ('' for other kinds, or
-- when the lock is free), then the owner fields found (none when it is free).
local function holders_changed(key)
    local reply = { 'changed', redis.call('hget', key, 'mode') or '' }
    for _, field in ipairs(holder_fields(key)) do
        reply[#reply + 1] = field
    end
    return reply
end
