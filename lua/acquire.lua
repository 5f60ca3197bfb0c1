-- Acquire or re-enter reentrant locks (Redisson RLock layout): one lock, or the locks of
-- concurrent callers of one client in one call.
-- KEYS[i] lock hash i
-- ARGV[2i - 1] lease of KEYS[i] in milliseconds
-- ARGV[2i] owner field "<client-uuid>:<task-id>" asking for KEYS[i]
-- ARGV[2 * #KEYS + 1] optional: present when one caller is alone in the call, whose one
--                     reply then comes bare, sparing the client an array to parse
-- Returns one integer per key: -3 when acquired afresh (the owner had no count: its field
-- is new), -6 when re-entered (the owner's count went up from 1 or more), the lease reset in
-- both cases; the client tells the two apart so that an owner whose field vanished (a force
-- unlock, a restart without persistence) learns it lost its earlier hold; -4 when the key is not a lock (another type, a read-write lock, a hash
-- of other data: nothing written); otherwise the holder's PTTL in milliseconds (-1 when
-- the holder set no expiry). Redisson answers nil for "acquired", which a Lua array cannot
-- hold; PTTL never answers below -2.
local replies = {}
for i = 1, #KEYS do
    local key, lease, owner = KEYS[i], ARGV[2 * i - 1], ARGV[2 * i]
    -- pcall: a key of another type must fail its own item, not every caller's in the batch.
    local mine = redis.call('exists', key) == 0 or redis.pcall('hexists', key, owner)
    -- A read-write lock's reader field has the same shape as an owner field: the task
    -- holding the read lock must not re-enter it as a reentrant lock.
    if mine == 1 and redis.call('hexists', key, 'mode') == 1 then
        mine = 0
    end
    if mine == true or mine == 1 then
        local count = redis.call('hincrby', key, owner, 1)
        redis.call('pexpire', key, lease)
        replies[i] = count == 1 and -3 or -6
    elseif mine == 0 and lock_shaped(key) then
        replies[i] = redis.call('pttl', key)
    else
        replies[i] = -4
    end
end
if ARGV[2 * #KEYS + 1] then
    return replies[1]
end
return replies
