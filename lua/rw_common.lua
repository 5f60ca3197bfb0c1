-- Shared by the read-write lock scripts (prepended at build time, after lock_common.lua).
-- Layout (Redisson RReadWriteLock): one hash at the lock key K, with the field `mode`
-- ('read' or 'write'), the writer's field `<owner>:write` -> count, and each reader's field
-- `<owner>` -> count. Read hold n of a reader also has the key
-- `{K}:<owner>:rwlock_timeout:<n>` (`K:...` when K has a brace already), which carries that
-- hold's lease; the hash lives as long as the longest of them, and as the writer's lease.
-- Every key of one lock shares K's hash slot.

-- The mode of the read-write lock at `key`: 'none' when there is none, 'read' or
-- 'write', or nil when the key holds anything else (a lock of another kind, whose hash
-- has no `mode`; other data).
local function rw_mode(key)
    local kind = type_of(key)
    if kind == 'none' then
        return 'none'
    end
    if kind ~= 'hash' then
        return nil
    end
    local mode = redis.call('hget', key, 'mode')
    if mode == 'read' or mode == 'write' then
        return mode
    end
    return nil
end

-- The longest PTTL of the read holds' timeout keys of the lock at `key` (`prefix`: `{K}`),
-- counting only the first `keep` holds of `owner` (nil: all of every owner's); -3 when
-- there are none. A reader whose keys expired (its process died, its lease ran out) counts
-- for nothing, so that it cannot keep the lock held. Reads only.
local function longest_read(key, prefix, owner, keep)
    local longest = -3
    local fields = redis.call('hgetall', key)
    for i = 1, #fields, 2 do
        local field, count = fields[i], tonumber(fields[i + 1])
        -- The writer's field has no timeout keys; `mode` is no count.
        if count and string.sub(field, -6) ~= ':write' then
            if field == owner and keep then
                count = math.min(count, keep)
            end
            for n = 1, count do
                local ttl = redis.call('pttl', prefix .. ':' .. field .. ':rwlock_timeout:' .. n)
                longest = math.max(longest, ttl)
            end
        end
    end
    return longest
end
