#!lua flags=allow-oom
-- Keep many fair waiters' places in their queues in one call, and clean the queues up.
-- allow-oom: it only refreshes places that exist and reorders queues, and a full Redis
-- must not cost live waiters their places.
-- For waiter i: KEYS[3i-2] lock hash, KEYS[3i-1] waiting queue, KEYS[3i] waiter deadlines.
-- ARGV[1] how long a waiter keeps its place without refreshing it, in ms
-- ARGV[2] unlock message ("0")
-- ARGV[3] publish command: "publish", or "spublish" with sharded pub/sub
-- ARGV[4] ms added to a deadline for each waiter ahead (see fair_acquire.lua's ARGV[8])
-- ARGV[2i + 3] unlock channel of waiter i's lock
-- ARGV[2i + 4] owner field of waiter i
-- Returns one integer per waiter: 1 when its deadline was pushed forward; 2 when it heads
-- the queue of a free lock and should take it now (its deadline is left to run: a head
-- that is told its turn and does not take it, such as a future nobody polls, must not
-- hold the queue up for longer than a dead waiter would); 0 when it is no longer queued
-- (it took the lock, left, or was dropped as stale, or its keys are no lock's).
local now = server_now()
local refreshed = {}
for i = 1, #KEYS / 3 do
    local lock, queue, timeouts = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
    local channel, owner = ARGV[2 * i + 3], ARGV[2 * i + 4]
    if fair_shape_error(lock, queue, timeouts) then
        refreshed[i] = 0
    else
        purge(queue, timeouts, now)
        local free = redis.call('exists', lock) == 0
        if free then
            -- A hand-over in flight, or one that stalled on a head the purge just dropped:
            -- tell whoever heads the queue now.
            notify_head(queue, timeouts, channel, ARGV[2], ARGV[3], now)
        end
        if redis.call('zscore', timeouts, owner) == false then
            refreshed[i] = 0
        elseif free and redis.call('lindex', queue, 0) == owner then
            refreshed[i] = 2
        else
            redis.call('zadd', timeouts, place_deadline(queue, owner, now, ARGV[1], ARGV[4]), owner)
            refreshed[i] = 1
        end
        forget_empty_queue(queue, timeouts)
    end
end
return refreshed
