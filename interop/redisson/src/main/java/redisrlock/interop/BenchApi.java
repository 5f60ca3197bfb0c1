package redisrlock.interop;

import java.util.concurrent.CompletionStage;

import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;

/**
 * The Redisson lock APIs {@link Bench} measures, each by its id: {@code lock} ({@code getLock},
 * blocking {@code lock()}/{@code unlock()}), {@code lock_async} ({@code getLock},
 * {@code lockAsync(threadId)}/{@code unlockAsync(threadId)}) and {@code fair}
 * ({@code getFairLock}, blocking).
 */
enum BenchApi {
    LOCK("lock", "RLock lock()", false, false),
    LOCK_ASYNC("lock_async", "RLock lockAsync()", false, true),
    FAIR("fair", "RFairLock lock()", true, false);

    /**
     * The first owner id async callers use. Redisson names a lock's owner by a thread id,
     * and an async chain runs on whatever Netty thread completed its last step, so each
     * async caller passes an id of its own, far above any real thread's.
     */
    static final long ASYNC_OWNERS = 1L << 40;

    final String id;
    final String described;
    final boolean fair;
    final boolean async;

    BenchApi(String id, String described, boolean fair, boolean async) {
        this.id = id;
        this.described = described;
        this.fair = fair;
        this.async = async;
    }

    static BenchApi of(String id) {
        for (BenchApi api : values()) {
            if (api.id.equals(id)) {
                return api;
            }
        }
        throw new IllegalArgumentException("unknown api " + id + " (lock, lock_async, fair)");
    }

    /** The Redisson object this API takes, with the client's defaults (watchdog lease). */
    RLock lock(RedissonClient redisson, String name) {
        return fair ? redisson.getFairLock(name) : redisson.getLock(name);
    }

    /**
     * One lock + unlock by the calling thread, waiting for both: {@code owner} names the
     * owner of an async pair, a blocking one is the calling thread's.
     */
    void pair(RLock lock, long owner) {
        if (async) {
            asyncPair(lock, owner).toCompletableFuture().join();
        } else {
            lock.lock();
            lock.unlock();
        }
    }

    /** {@code lockAsync} then {@code unlockAsync}, as one stage. */
    static CompletionStage<Void> asyncPair(RLock lock, long owner) {
        return lock.lockAsync(owner).thenCompose(v -> lock.unlockAsync(owner));
    }
}
