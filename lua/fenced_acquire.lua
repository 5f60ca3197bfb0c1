-- Acquire or re-enter a fenced lock (Redisson RFencedLock layout): the reentrant lock, and
-- a fencing token from a counter that only grows.
-- KEYS[1] lock hash
-- KEYS[2] token counter (no expiry: tokens must grow across every holder, ever)
-- ARGV[1] lease in milliseconds
-- ARGV[2] owner field "<client-uuid>:<task-id>"
-- Returns {1, token} when acquired afresh (the owner had no count), {2, token} when
-- re-entered (every acquire gets a new token, as in Redisson), the token as a decimal string, exact over INCR's whole range; otherwise
-- {0, holder's PTTL} (-1 when the holder set no expiry). Fails with NOTALOCK when either
-- key is not what a fenced lock keeps there, and with Redis' own error when the counter
-- cannot grow; nothing is written then.
local mine = redis.call('exists', KEYS[1]) == 0 or redis.pcall('hexists', KEYS[1], ARGV[2])
-- A read-write lock's reader field has the same shape as an owner field (see acquire.lua).
if mine == 1 and redis.call('hexists', KEYS[1], 'mode') == 1 then
    mine = 0
end
if mine == true or mine == 1 then
    local kind = type_of(KEYS[2])
    if kind ~= 'none' and kind ~= 'string' then
        return not_a_lock(KEYS[2])
    end
    -- The counter first: if it cannot grow (not an integer, or at 2^63 - 1), INCR fails
    -- before the lock is written.
    redis.call('incr', KEYS[2])
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    -- GET, not INCR's reply: that reaches Lua as a double.
    return {count == 1 and 1 or 2, redis.call('get', KEYS[2])}
end
if mine == 0 and lock_shaped(KEYS[1]) then
    return {0, redis.call('pttl', KEYS[1])}
end
return not_a_lock(KEYS[1])
