package org.redisson;

import java.util.concurrent.TimeUnit;

import org.redisson.api.RLock;
import org.redisson.client.protocol.RedisCommands;

/**
 * Redisson's own steps that its public API runs only as part of a whole call, for scenarios
 * that must stop a Java waiter between two of them. In Redisson's package because the steps
 * are package-private.
 */
public final class DriverAccess {
    private DriverAccess() {
    }

    /**
     * The first script call of {@code RedissonLock.lock()} (for a fair lock: joining the
     * queue), with the lease {@code lock()} gives it, and nothing after it: no subscription,
     * no wait. The holder's TTL, or null when it took the lock.
     */
    public static Long firstAttempt(RLock lock, long leaseMs) {
        long threadId = Thread.currentThread().getId();
        return ((RedissonLock) lock)
                .<Long>tryLockInnerAsync(-1, leaseMs, TimeUnit.MILLISECONDS, threadId, RedisCommands.EVAL_LONG)
                .toCompletableFuture()
                .join();
    }
}
