#!lua flags=no-writes
-- Read one lock for the read-only calls (is_locked, hold_count, remaining_ttl): whether it
-- is there, its PTTL, and one owner's hold count, refusing a key that is not a lock.
-- no-writes: it writes nothing, so it runs when Redis is full, too.
-- KEYS[1] lock hash
-- ARGV[1] owner field "<client-uuid>:<task-id>"
-- Returns {pttl, count}: pttl -2 when there is no lock (-1 when it has no expiry), count 0
-- when the owner holds none. Fails with NOTALOCK when the key is not a lock.
local kind = type_of(KEYS[1])
if kind == 'none' then
    return {-2, 0}
end
if kind ~= 'hash' or not lock_shaped(KEYS[1]) then
    return not_a_lock(KEYS[1])
end
local count = tonumber(redis.call('hget', KEYS[1], ARGV[1])) or 0
return {redis.call('pttl', KEYS[1]), count}
