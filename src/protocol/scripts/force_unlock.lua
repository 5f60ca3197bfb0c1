#!lua flags=allow-oom
-- Delete a lock whoever holds it, and wake one waiter. Refuses a key that is not a lock,
-- so that a name that collides with other data never deletes it.
-- allow-oom: see unlock.lua.
-- KEYS[1] lock hash
-- ARGV[1] unlock channel
-- ARGV[2] unlock message ("0")
-- ARGV[3] publish command: "publish", or "spublish" with sharded pub/sub
-- Returns 1 when a lock was deleted, 0 when there was none.
local kind = type_of(KEYS[1])
if kind == 'none' then
    return 0
end
if kind ~= 'hash' or not lock_shaped(KEYS[1]) then
    return not_a_lock(KEYS[1])
end
-- Published first: a refused PUBLISH fails the call before anything is deleted.
redis.call(ARGV[3], ARGV[1], ARGV[2])
redis.call('del', KEYS[1])
return 1
