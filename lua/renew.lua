-- Extend many watchdog locks in one call. PEXPIRE never grows memory, so this works when
-- Redis is full too.
-- KEYS[i] lock hash i
-- ARGV[1] lease in milliseconds
-- ARGV[i + 1] owner field expected in KEYS[i]
-- ARGV[#KEYS + 1 + i] (optional) the lease of KEYS[i], when the leases differ (a lock near
--     its maximum hold time gets only what is left of it)
-- Returns one integer per key: 1 when the owner still held it and its lease was reset,
-- 0 when the owner no longer holds it (expired, force-unlocked, or never held).
local each = #ARGV > #KEYS + 1
local renewed = {}
for i = 1, #KEYS do
    -- pcall: a key that is no longer a hash (overwritten by someone) must count as lost
    -- without failing the whole batch.
    if redis.pcall('hexists', KEYS[i], ARGV[i + 1]) == 1 then
        redis.call('pexpire', KEYS[i], each and ARGV[#KEYS + 1 + i] or ARGV[1])
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
