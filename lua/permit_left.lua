#!lua flags=no-writes
-- How long a taken permit has left (what a guard asks once its own deadline passed: another
-- client, Java's updateLeaseTime too, may have extended the lease).
-- KEYS[1] the count (unused: both keys are named, as in every permit script)
-- KEYS[2] the permits' expiries
-- ARGV[1] the permit's id, 16 raw bytes
-- Returns the milliseconds left on the server clock (0 or less: expired, not yet given
-- back); -1 when the permit is not there; NOTALOCK when a key holds something else.
local shape = permits_shape_error(KEYS[1], KEYS[2])
if shape then
    return shape
end
local expiry = redis.call('zscore', KEYS[2], ARGV[1])
if not expiry then
    return -1
end
return math.max(tonumber(expiry) - server_now(), 0)
