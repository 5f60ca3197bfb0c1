#!lua flags=allow-oom,allow-cross-slot-keys
-- Release one hold of reentrant locks (Redisson RLock layout), so that a retried release
-- never releases a second hold: one hold, or those of concurrent callers of one client in
-- one call.
--
-- allow-oom: a release must work when Redis is full (maxmemory with noeviction), or a lock
-- would stay held until its lease ran out. Without the flag, Redis refuses the first write
-- that may grow memory (HINCRBY of a nested release; see `scriptVerifyOOM` in Redis'
-- script.c). Needs Redis 7.0.
--
-- allow-cross-slot-keys: on a Redis Cluster, a call declares the keys of one slot, which
-- route it, and passes releases of other slots the same node serves undeclared (see
-- below); a script with a flags line may touch those only with this flag. No effect on one
-- Redis.
--
-- Retries without a latch. Redisson keeps each unlock request's answer in a key of its own
-- (`redisson_unlock_latch:{K}:<id>`, SET with a TTL) for a retry to read. Here the client
-- says instead how many holds its owner should count before this release: `expected`, one
-- for this release and one for each of the owner's guards that stay. A retry (its first try
-- may have run, its reply lost) compares the count it finds:
--   count >= expected   the release has not run: release, as a first try does;
--   count <  expected   an earlier try of it ran (the count is one lower): answer 0, as
--                       that try did, and write nothing;
--   no field, expected > 1   the owner's holds are gone while guards of it stay: -1, lost;
--   no field, expected == 1  a last release whose earlier try may have freed the lock, or
--                       which found it gone already: -2, and the client decides (see
--                       `locks::release`).
-- A first try cannot have run before, and releases whatever count it finds, as Redisson's
-- unlock does. Nothing is written but the lock hash and the message: no key of this
-- crate's unlocks lingers after them.
--
-- KEYS[i] lock hash of release i
-- ARGV[1] unlock message ("0")
-- ARGV[2] publish command: "publish", or "spublish" with sharded pub/sub (Redisson passes
--         it the same way)
-- ARGV[5i - 2] the lock's unlock channel, told ARGV[1] when the lock becomes free (not a
--              key: a channel needs no key permission)
-- ARGV[5i - 1] lease in milliseconds, re-applied while holds remain; 0 leaves the TTL as it
--              is (undoing an acquire for a caller who left must not shorten another
--              hold's lease)
-- ARGV[5i] owner field "<client-uuid>:<task-id>"
-- ARGV[5i + 1] "1" when this is a retry, whose first try may have run; "0" for a first try
-- ARGV[5i + 2] expected: the holds the owner should count before this release (see above)
-- After these, ARGV[#KEYS * 5 + 3 ..] holds either
--   one value: one caller is alone in the call, whose one reply then comes bare, sparing
--              the client an array to parse; or
--   sextuples (lock, channel, lease, owner, retry, expected) of more releases, their locks
--              not declared (on a cluster, of other slots of the same node). An undeclared
--              lock whose slot this node does not serve (the client's slot map is stale: a
--              failover, a migration) answers -7 and nothing is written for it; the
--              client sends it again alone, as the same request (nothing ran).
-- Returns one integer per release, declared ones first: -1 when the owner held nothing,
-- 0 when holds remain, 1 when the lock was freed, -2 (retries only, see above), -4 when
-- the key is not a lock, -5 when the user may not PUBLISH to the channel (nothing written:
-- a lock is never freed without its message), -7 as above.
local declared = #KEYS
local extra = #ARGV - (5 * declared + 2)
local releases = declared
if extra > 1 then
    releases = declared + extra / 6
end
local replies = {}
for i = 1, releases do
    local lock, at
    if i <= declared then
        lock, at = KEYS[i], 5 * i - 2
    else
        at = 5 * declared + 6 * (i - declared) - 3
        lock, at = ARGV[at], at + 1
    end
    local channel, lease, owner = ARGV[at], ARGV[at + 1], ARGV[at + 2]
    local retry, expected = ARGV[at + 3] == '1', tonumber(ARGV[at + 4])
    -- One HGET instead of Redisson's HEXISTS + HINCRBY: the last hold deletes the key.
    -- The release's first access, in pcall: for an undeclared lock, an error here (a slot
    -- served elsewhere, a key the user may not touch, or one of another type) comes before
    -- anything is written, and its resend alone tells which.
    local found = redis.pcall('hget', lock, owner)
    local count = tonumber(found)
    if i > declared and type(found) == 'table' then
        replies[i] = -7
    elseif found == false then
        if retry and expected == 1 then
            replies[i] = -2
        else
            replies[i] = -1
        end
    elseif count == nil or redis.call('hexists', lock, 'mode') == 1 then
        -- Not a hash, or a read-write lock whose reader field has an owner field's
        -- shape: never released as a reentrant lock.
        replies[i] = -4
    elseif retry and count < expected then
        replies[i] = 0
    elseif count > 1 then
        redis.call('hincrby', lock, owner, -1)
        if tonumber(lease) > 0 then
            redis.call('pexpire', lock, lease)
        end
        replies[i] = 0
    elseif type(redis.pcall(ARGV[2], channel, ARGV[1])) == 'table' then
        -- Told before the delete, which no one can see apart inside one script: a
        -- refused PUBLISH then leaves the lock as it was.
        replies[i] = -5
    else
        redis.call('del', lock)
        replies[i] = 1
    end
end
if extra == 1 then
    return replies[1]
end
return replies
