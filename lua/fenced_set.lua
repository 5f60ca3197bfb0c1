-- Write a value only for the holder of the newest fencing token seen: a resource's side of
-- fencing, so that a holder that lost its lock (paused past its lease) cannot overwrite
-- what a later holder wrote.
-- KEYS[1] the resource key
-- KEYS[2] the highest token accepted for it
-- ARGV[1] the writer's fencing token, in decimal
-- ARGV[2] the value
-- Returns 1 when written (the token is at least the highest seen), 0 when refused. Fails
-- with NOTALOCK when the highest token's key holds something else (nothing written).
local highest = stored_token(KEYS[2])
if highest == nil then
    return not_a_lock(KEYS[2])
end
if token_below(ARGV[1], highest) then
    return 0
end
redis.call('set', KEYS[2], ARGV[1])
redis.call('set', KEYS[1], ARGV[2])
return 1
