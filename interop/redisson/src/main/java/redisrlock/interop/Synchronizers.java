package redisrlock.interop;

import java.util.concurrent.TimeUnit;

import org.redisson.api.RCountDownLatch;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.client.RedisException;

/**
 * The driver's semaphores and latch: the kinds {@code semaphore} ({@code getSemaphore}),
 * {@code pes} ({@code getPermitExpirableSemaphore}) and {@code latch}
 * ({@code getCountDownLatch}), each request {@code <kind> <op> <name> [args]} with durations
 * in milliseconds. {@link Driver} hands these kinds here.
 *
 * <p>{@code semaphore}: {@code trysetpermits N} (true or false), {@code acquire N} (blocks),
 * {@code tryacquire N [WAIT]} (true or false), {@code release N}, {@code addpermits N},
 * {@code available}, {@code drain}.
 *
 * <p>{@code pes}: {@code trysetpermits N}, {@code acquire LEASE} (blocks; answers the permit
 * id), {@code tryacquire WAIT LEASE} (the id or null), {@code release ID} (throws when the
 * permit is not taken), {@code tryrelease ID} (true or false), {@code updatelease ID LEASE}
 * (true or false), {@code addpermits N}, {@code available}, {@code acquired}.
 *
 * <p>{@code latch}: {@code trysetcount N}, {@code countdown}, {@code count}, {@code await}
 * (blocks), {@code awaitfor WAIT} (true or false), {@code delete}.
 */
final class Synchronizers {
    private final RedissonClient redisson;

    Synchronizers(RedissonClient redisson) {
        this.redisson = redisson;
    }

    /** Whether {@code kind} is one of these. */
    static boolean handles(String kind) {
        return kind.equals("semaphore") || kind.equals("pes") || kind.equals("latch");
    }

    Object execute(String kind, String op, String name, String[] args) throws InterruptedException {
        try {
            return switch (kind) {
                case "semaphore" -> semaphore(redisson.getSemaphore(name), op, args);
                case "pes" -> expirable(redisson.getPermitExpirableSemaphore(name), op, args);
                case "latch" -> latch(redisson.getCountDownLatch(name), op, args);
                default -> throw new IllegalArgumentException("unknown kind " + kind);
            };
        } catch (RedisException e) {
            // Redisson's synchronous calls wrap what the call failed with (such as the
            // IllegalArgumentException of a release by an unknown id): answer that.
            if (e.getCause() instanceof RuntimeException cause) {
                throw cause;
            }
            throw e;
        }
    }

    private static Object semaphore(RSemaphore semaphore, String op, String[] args) throws InterruptedException {
        switch (op) {
            case "trysetpermits" -> {
                return semaphore.trySetPermits(intArg(args, 0));
            }
            case "acquire" -> {
                semaphore.acquire(intArg(args, 0));
                return null;
            }
            case "tryacquire" -> {
                if (args.length > 1) {
                    return semaphore.tryAcquire(intArg(args, 0), Long.parseLong(args[1]), TimeUnit.MILLISECONDS);
                }
                return semaphore.tryAcquire(intArg(args, 0));
            }
            case "release" -> {
                semaphore.release(intArg(args, 0));
                return null;
            }
            case "addpermits" -> {
                semaphore.addPermits(intArg(args, 0));
                return null;
            }
            case "available" -> {
                return semaphore.availablePermits();
            }
            case "drain" -> {
                return semaphore.drainPermits();
            }
            default -> throw new IllegalArgumentException("unknown semaphore op " + op);
        }
    }

    private static Object expirable(RPermitExpirableSemaphore semaphore, String op, String[] args)
            throws InterruptedException {
        switch (op) {
            case "trysetpermits" -> {
                return semaphore.trySetPermits(intArg(args, 0));
            }
            case "acquire" -> {
                return semaphore.acquire(Long.parseLong(args[0]), TimeUnit.MILLISECONDS);
            }
            case "tryacquire" -> {
                return semaphore.tryAcquire(Long.parseLong(args[0]), Long.parseLong(args[1]), TimeUnit.MILLISECONDS);
            }
            case "release" -> {
                semaphore.release(args[0]);
                return null;
            }
            case "tryrelease" -> {
                return semaphore.tryRelease(args[0]);
            }
            case "updatelease" -> {
                return semaphore.updateLeaseTime(args[0], Long.parseLong(args[1]), TimeUnit.MILLISECONDS);
            }
            case "addpermits" -> {
                semaphore.addPermits(intArg(args, 0));
                return null;
            }
            case "available" -> {
                return semaphore.availablePermits();
            }
            case "acquired" -> {
                return semaphore.acquiredPermits();
            }
            default -> throw new IllegalArgumentException("unknown pes op " + op);
        }
    }

    private static Object latch(RCountDownLatch latch, String op, String[] args) throws InterruptedException {
        switch (op) {
            case "trysetcount" -> {
                return latch.trySetCount(Long.parseLong(args[0]));
            }
            case "countdown" -> {
                latch.countDown();
                return null;
            }
            case "count" -> {
                return latch.getCount();
            }
            case "await" -> {
                latch.await();
                return null;
            }
            case "awaitfor" -> {
                return latch.await(Long.parseLong(args[0]), TimeUnit.MILLISECONDS);
            }
            case "delete" -> {
                return latch.delete();
            }
            default -> throw new IllegalArgumentException("unknown latch op " + op);
        }
    }

    private static int intArg(String[] args, int index) {
        if (args.length <= index) {
            throw new IllegalArgumentException("expected an argument at " + index);
        }
        return Integer.parseInt(args[index]);
    }
}
