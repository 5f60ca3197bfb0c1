#!lua flags=allow-oom
-- Delete a lock whoever holds it, and wake one waiter. Refuses a key that is not a lock,
-- so that a name that collides with other data never deletes it.
-- allow-oom: see unlock.lua.
-- KEYS[1] lock hash
-- ARGV[1] unlock channel
-- ARGV[2] unlock message ("0")
-- ARGV[3] publish command: "publish", or "spublish" with sharded pub/sub
-- ARGV[4..] optional: the holders the caller saw, to free the lock only if it is still
--           held by exactly them (see expects_holders in lock_common.lua)
-- Returns 1 when a lock was deleted, 0 when there was none; with ARGV[4..], the
-- holders_changed reply when the lock is not held as the caller saw it (nothing changed).
local kind = type_of(KEYS[1])
if kind ~= 'none' and (kind ~= 'hash' or not lock_shaped(KEYS[1])) then
    return not_a_lock(KEYS[1])
end
if expects_holders(4) and not held_as_seen(KEYS[1], 4) then
    return holders_changed(KEYS[1])
end
if kind == 'none' then
    return 0
end
-- Published first: a refused PUBLISH fails the call before anything is deleted.
redis.call(ARGV[3], ARGV[1], ARGV[2])
redis.call('del', KEYS[1])
return 1
