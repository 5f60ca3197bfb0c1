-- The wait registry's record of what one owner waits for, for the tools that walk from a
-- lock's holder to the lock it waits for in turn (`rlock deadlocks`, the long-wait warning).
-- KEYS[1] redis_rlock_waiting:{<owner field>}, a hash: `lock` (the lock's key), `since`
--         (when this wait began, ms on the server's clock), `client` (the waiter's client
--         name)
-- ARGV[1] the lock's key
-- ARGV[2] the client name
-- ARGV[3] how long the record lives unrefreshed, in ms
-- A record of another lock is replaced (and `since` restarts); one of this lock is only
-- kept alive, so that `since` is when the wait began.
if redis.call('hget', KEYS[1], 'lock') ~= ARGV[1] then
    local time = redis.call('time')
    local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
    redis.call('del', KEYS[1])
    redis.call('hset', KEYS[1], 'lock', ARGV[1], 'since', now, 'client', ARGV[2])
end
redis.call('pexpire', KEYS[1], ARGV[3])
return 1
