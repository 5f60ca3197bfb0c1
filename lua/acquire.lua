-- Acquire or re-enter reentrant locks (Redisson RLock layout): one lock, or the locks of
-- concurrent callers of one client in one call.
-- KEYS[i] lock hash i
-- ARGV[2i - 1] lease of KEYS[i] in milliseconds
-- ARGV[2i] owner field "<client-uuid>:<task-id>" asking for KEYS[i]
-- Returns one integer per key: -3 when acquired (the owner's count went up by one and the
-- lease was reset), otherwise the holder's PTTL in milliseconds (-1 when the holder set no
-- expiry). Redisson answers nil for "acquired", which a Lua array cannot hold; PTTL never
-- answers below -2.
local replies = {}
for i = 1, #KEYS do
    local lease, owner = ARGV[2 * i - 1], ARGV[2 * i]
    if (redis.call('exists', KEYS[i]) == 0) or (redis.call('hexists', KEYS[i], owner) == 1) then
        redis.call('hincrby', KEYS[i], owner, 1)
        redis.call('pexpire', KEYS[i], lease)
        replies[i] = -3
    else
        replies[i] = redis.call('pttl', KEYS[i])
    end
end
return replies
