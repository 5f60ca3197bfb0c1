#!lua flags=no-writes
-- Whether each owner still holds its lock, or each expirable permit is still taken: for
-- fixed-lease holds after the client reconnected, since a Redis that restarted without its
-- data, or failed over to a replica that lacked the lock, forgot it, and no renewal will
-- ever find out.
-- KEYS[i] lock hash i, or an expirable semaphore's permit expiries (a sorted set)
-- ARGV[i] owner field expected in KEYS[i]; for a sorted set, the permit's id in 32 hex
--         digits (its member is the 16 bytes they spell)
-- Returns one integer per key: 1 when the owner holds it, 0 when not.
local function unhex(hex)
    return (string.gsub(hex, '%x%x', function(pair)
        return string.char(tonumber(pair, 16))
    end))
end

local held = {}
for i = 1, #KEYS do
    held[i] = 0
    if redis.call('type', KEYS[i])['ok'] == 'zset' then
        if string.find(ARGV[i], '^%x+$') and #ARGV[i] == 32
            and redis.call('zscore', KEYS[i], unhex(ARGV[i])) then
            held[i] = 1
        end
    -- pcall: a key that is no longer a hash counts as not held.
    elseif redis.pcall('hexists', KEYS[i], ARGV[i]) == 1 then
        held[i] = 1
    end
end
return held
