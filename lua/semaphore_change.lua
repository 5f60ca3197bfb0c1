#!lua flags=allow-oom
-- Give permits back or add some (Redisson RSemaphore.release and addPermits,
-- RPermitExpirableSemaphore.addPermits), and tell the waiters.
-- allow-oom: see unlock.lua; a release must work when Redis is full.
-- KEYS[1] the count
-- KEYS[2] optional: the request's latch (see `latched` in sync_common.lua)
-- ARGV[1] permits to add (negative: taken away, as Redisson's addPermits allows)
-- ARGV[2] channel
-- ARGV[3] publish command
-- ARGV[4] "release": INCRBY, publishing the new count (RSemaphore.release); "add": SET to
--         the new count, publishing it (RSemaphore.addPermits, which also drops a TTL);
--         "add-expirable": SET, publishing the permits added when there are any
--         (RPermitExpirableSemaphore.addPermits)
-- ARGV[5], ARGV[6] the lowest and highest count allowed (a Java int's range: Redisson reads
--         the count as one)
-- ARGV[7] with a latch: its time-to-live in milliseconds
-- Returns the new count; NOTALOCK when the key holds something else, OVERFLOW when the
-- count would leave its range (nothing written in both cases). A retried request answers
-- as its first try did.
local done = latched(KEYS[2])
if done then
    return done
end
local value = count_at(KEYS[1])
if value == false then
    return not_a_count(KEYS[1])
end
local added = tonumber(ARGV[1])
local new = (value or 0) + added
if new < tonumber(ARGV[5]) or new > tonumber(ARGV[6]) then
    return out_of_range(KEYS[1], new, ARGV[5], ARGV[6])
end
-- Told first: a refused PUBLISH fails the call before anything is written.
if ARGV[4] == 'add-expirable' then
    if added > 0 then
        redis.call(ARGV[3], ARGV[2], ARGV[1])
    end
else
    redis.call(ARGV[3], ARGV[2], string.format('%.0f', new))
end
if ARGV[4] == 'release' then
    redis.call('incrby', KEYS[1], ARGV[1])
else
    redis.call('set', KEYS[1], string.format('%.0f', new))
end
return latch_answer(KEYS[2], ARGV[7], new)
