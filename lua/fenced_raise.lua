-- Raise a fenced lock's token counter to a RedLock's token, while the RedLock still holds
-- this master: the next holder to take the lock here then draws a greater token, whatever
-- the counters of the masters it did not share with this holder.
-- KEYS[1] lock hash
-- KEYS[2] token counter
-- ARGV[1] owner field "<client-uuid>:<task-id>"
-- ARGV[2] the RedLock's token: the greatest its majority drew, in decimal
-- Returns 1 when the owner holds the lock here and the counter is now at least the token,
-- 0 when the owner no longer holds it (nothing written: its hold here cannot vouch for the
-- order of later holders).
if redis.pcall('hexists', KEYS[1], ARGV[1]) ~= 1 then
    return 0
end
local current = stored_token(KEYS[2])
if current == nil then
    return not_a_lock(KEYS[2])
end
if token_below(current, ARGV[2]) then
    redis.call('set', KEYS[2], ARGV[2])
end
return 1
