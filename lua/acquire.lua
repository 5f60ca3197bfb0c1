-- Acquire or re-enter reentrant locks (Redisson RLock layout): one lock, or the locks of
-- concurrent callers of one client in one call.
-- KEYS[i] lock hash i
-- ARGV[2i - 1] lease of KEYS[i] in milliseconds
-- ARGV[2i] owner field "<client-uuid>:<task-id>" asking for KEYS[i]
-- After these, ARGV[2 * #KEYS + 1 ..] holds either
--   one value: one caller is alone in the call, whose one reply then comes bare, sparing
--              the client an array to parse; or
--   triples (key, lease, owner) of more locks, not declared: on a Redis Cluster, a call
--              declares the keys of one slot, which route it, and passes the locks of other
--              slots the same node serves here (a script without a flags line may touch
--              them). An undeclared lock whose slot this node does not serve (the client's
--              slot map is stale: a failover, a migration) answers -7 and nothing is
--              written for it; the client sends it again alone.
-- Returns one integer per lock, declared ones first: -3 when acquired afresh (the owner had
-- no count: its field is new), -6 when re-entered (the owner's count went up from 1 or
-- more), the lease reset in both cases; the client tells the two apart so that an owner
-- whose field vanished (a force unlock, a restart without persistence) learns it lost its
-- earlier hold; -4 when the key is not a lock (another type, a read-write lock, a hash of
-- other data: nothing written); -7 as above; otherwise the holder's PTTL in milliseconds
-- (-1 when the holder set no expiry). Redisson answers nil for "acquired", which a Lua
-- array cannot hold; PTTL never answers below -2.
local declared = #KEYS
local extra = #ARGV - 2 * declared
local locks = declared
if extra > 1 then
    locks = declared + extra / 3
end
local replies = {}
for i = 1, locks do
    local key, lease, owner
    if i <= declared then
        key, lease, owner = KEYS[i], ARGV[2 * i - 1], ARGV[2 * i]
    else
        local at = 2 * declared + 3 * (i - declared) - 2
        key, lease, owner = ARGV[at], ARGV[at + 1], ARGV[at + 2]
    end
    -- The lock's first access. For an undeclared key in pcall: one of a slot served
    -- elsewhere (or one the user may not touch) fails here, before anything is written for
    -- it, and its resend alone, declared, tells which. A declared key's error (the user may
    -- not run EXISTS) fails the call, as it always did, and reaches the caller.
    local exists
    if i <= declared then
        exists = redis.call('exists', key)
    else
        exists = redis.pcall('exists', key)
    end
    if type(exists) == 'table' then
        replies[i] = -7
    else
        -- pcall: a key of another type must fail its own item, not every caller's.
        local mine = exists == 0 or redis.pcall('hexists', key, owner)
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
end
if extra == 1 then
    return replies[1]
end
return replies
