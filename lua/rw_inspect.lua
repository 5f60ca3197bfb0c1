#!lua flags=no-writes
-- Read one side of a read-write lock for the read-only calls (is_locked, hold_count,
-- remaining_ttl), refusing a key that is not a read-write lock. no-writes: see
-- inspect.lua.
-- KEYS[1] lock hash
-- ARGV[1] owner field (the read lock's "<client-uuid>:<task-id>", the write lock's
--         "<client-uuid>:<task-id>:write")
-- ARGV[2] the side: "read" or "write"
-- Returns {pttl, count, locked}: the hash's PTTL (-2 when there is no lock, -1 when it has
-- no expiry), the owner's count (0 when it holds none), and 1 when the side is held as
-- Redisson's isLocked() says: the write lock when the mode is 'write'; the read lock when
-- the mode is 'read', or 'write' with read holds beside the writer's field.
local mode = rw_mode(KEYS[1])
if mode == nil then
    return not_a_lock(KEYS[1])
end
if mode == 'none' then
    return {-2, 0, 0}
end
local count = tonumber(redis.call('hget', KEYS[1], ARGV[1])) or 0
local locked = 0
if ARGV[2] == 'write' then
    if mode == 'write' then
        locked = 1
    end
elseif mode == 'read' or redis.call('hlen', KEYS[1]) > 2 then
    locked = 1
end
return {redis.call('pttl', KEYS[1]), count, locked}
