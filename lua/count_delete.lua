#!lua flags=allow-oom
-- Delete a semaphore, an expirable semaphore or a latch (Redisson's deleteAsync), refusing
-- keys that hold something else so that a name that collides with other data never
-- deletes it.
-- allow-oom: see unlock.lua.
-- KEYS[1] the count
-- KEYS[2] optional: an expirable semaphore's permit expiries (a sorted set)
-- ARGV[1] channel
-- ARGV[2] publish command
-- ARGV[3] message told when the count was there ("1", a latch's: its waiters read the count
--         again), or "" to tell nobody (a semaphore's delete, as Redisson's)
-- Returns 1 when something was deleted, 0 when nothing was there.
if count_at(KEYS[1]) == false then
    return not_a_count(KEYS[1])
end
if KEYS[2] and not (type_of(KEYS[2]) == 'none' or type_of(KEYS[2]) == 'zset') then
    return not_a_count(KEYS[2])
end
if ARGV[3] ~= '' and type_of(KEYS[1]) ~= 'none' then
    redis.call(ARGV[2], ARGV[1], ARGV[3])
end
if redis.call('del', unpack(KEYS)) > 0 then
    return 1
end
return 0
