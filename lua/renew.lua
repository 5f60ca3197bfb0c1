-- Extend many watchdog locks in one call.
-- KEYS[i] lock hash i
-- ARGV[1] lease in milliseconds
-- ARGV[i + 1] owner field expected in KEYS[i]
-- Returns one integer per key: 1 when the owner still held it and its lease was reset,
-- 0 when the owner no longer holds it (expired, force-unlocked, or never held).
local renewed = {}
for i = 1, #KEYS do
    -- pcall: a key that is no longer a hash (overwritten by someone) must count as lost
    -- without failing the whole batch.
    if redis.pcall('hexists', KEYS[i], ARGV[i + 1]) == 1 then
        redis.call('pexpire', KEYS[i], ARGV[1])
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
