#!lua flags=no-writes
-- Whether each owner still holds its lock: for fixed-lease holds after the client
-- reconnected, since a Redis that restarted without its data, or failed over to a replica
-- that lacked the lock, forgot it, and no renewal will ever find out.
-- KEYS[i] lock hash i
-- ARGV[i] owner field expected in KEYS[i]
-- Returns one integer per key: 1 when the owner holds it, 0 when not.
local held = {}
for i = 1, #KEYS do
    -- pcall: a key that is no longer a hash counts as not held.
    if redis.pcall('hexists', KEYS[i], ARGV[i]) == 1 then
        held[i] = 1
    else
        held[i] = 0
    end
end
return held
