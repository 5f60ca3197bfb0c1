package redisrlock.interop;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import org.redisson.DriverAccess;
import org.redisson.Redisson;
import org.redisson.api.RAtomicLong;
import org.redisson.api.RBucket;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;
import org.redisson.config.ShardedSubscriptionMode;

/**
 * One Redisson client, scripted line by line over stdin/stdout by redis-rlock's interop tests.
 *
 * <p>Start: {@code java -jar redisson-driver.jar --url redis://127.0.0.1:PORT
 * [--watchdog-ms N] [--fair-wait-ms N]}, or with {@code --cluster
 * redis://127.0.0.1:PORT,redis://127.0.0.1:PORT2 [--sharded auto|on|off]} in place of
 * {@code --url} for a Redis Cluster ({@code shardedSubscriptionMode}, AUTO by default). Once the client is connected the driver prints one
 * line, {@code {"event":"ready","redisson":"3.x.y","client_id":"<uuid>",...}}.
 *
 * <p>Requests, one per line, words separated by spaces:
 * {@code <request-id> <thread> <kind> <op> [args...]}, or {@code <request-id> <thread> ping}.
 * {@code <thread>} names a logical Java thread (any word, such as {@code t1}): each has its own
 * platform thread, created on first use, that runs its requests one after another. Redisson
 * ties lock ownership to the Java thread id, so a lock taken by {@code t1} is held by
 * {@code t1} until {@code t1} unlocks it, and a {@code lock} that blocks holds up only that
 * thread's later requests, as it would in a Java service.
 *
 * <p>Every request gets exactly one reply line, in completion order (not request order):
 * {@code {"id":7,"ok":true,"thread":"t1","thread_id":31,"start_us":...,"end_us":...,
 * "value":...}}, or with {@code "ok":false,"error":"<exception class>","message":"..."}.
 * {@code start_us} and {@code end_us} are wall-clock microseconds since the epoch around the
 * Redisson call, so the Rust side can time a hand-over between the two processes on one
 * machine.
 *
 * <p>Kinds map to Redisson objects: {@code lock} ({@code getLock}), {@code fair}
 * ({@code getFairLock}), {@code fenced} ({@code getFencedLock}). Later kinds (read-write
 * lock, semaphores, latch) add a case in {@link #kind} and their own ops. Ops of the lock
 * family, with durations in milliseconds:
 * <ul>
 *   <li>{@code lock NAME [LEASE]}: {@code lock()} or {@code lock(lease)}; a fenced lock
 *       answers its token ({@code lockAndGetToken}).
 *   <li>{@code trylock NAME WAIT [LEASE]}: {@code tryLock(wait[, lease])}: true or false; a
 *       fenced lock answers its token or null ({@code tryLockAndGetToken}).
 *   <li>{@code unlock NAME}, {@code forceunlock NAME} (true when something was deleted).
 *   <li>{@code holdcount NAME}, {@code held NAME} ({@code isHeldByCurrentThread}),
 *       {@code locked NAME}, {@code ttl NAME} ({@code remainTimeToLive}), and for fenced
 *       locks {@code token NAME} ({@code getToken}).
 *   <li>{@code firstattempt NAME}: only the first script call of {@code lock()} (a fair
 *       lock: joining the queue), without subscribing or waiting; the holder's TTL, or null
 *       when it took the lock. A later {@code lock} on the same thread goes on from there.
 *   <li>{@code exclusive NAME COUNTER ROUNDS}: ROUNDS times: lock; {@code INCR COUNTER:inside}
 *       (anything but 1 is an overlap); {@code GET COUNTER}, then {@code SET COUNTER} to one
 *       more (a lost update unless exclusive); {@code DECR COUNTER:inside}; unlock. Answers
 *       the number of overlaps seen.
 * </ul>
 *
 * <p>The driver exits at once when stdin closes, so a test that dies leaves no JVM behind.
 */
public final class Driver {
    private final RedissonClient redisson;
    private final PrintStream out;
    /** One single-thread executor per logical thread name. */
    private final Map<String, ExecutorService> threads = new ConcurrentHashMap<>();
    /** The semaphores and the latch (kinds {@code semaphore}, {@code pes}, {@code latch}). */
    private final Synchronizers synchronizers;

    private Driver(RedissonClient redisson, PrintStream out) {
        this.redisson = redisson;
        this.out = out;
        this.synchronizers = new Synchronizers(redisson);
    }

    public static void main(String[] args) throws Exception {
        Config config = new Config();
        String url = null;
        String cluster = null;
        String sharded = "auto";
        for (int i = 0; i + 1 < args.length; i += 2) {
            String value = args[i + 1];
            switch (args[i]) {
                case "--url" -> url = value;
                case "--cluster" -> cluster = value;
                case "--sharded" -> sharded = value;
                case "--watchdog-ms" -> config.setLockWatchdogTimeout(Long.parseLong(value));
                case "--fair-wait-ms" -> config.setFairLockWaitTimeout(Long.parseLong(value));
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        if ((url == null) == (cluster == null) || args.length % 2 != 0) {
            throw new IllegalArgumentException(
                    "usage: (--url redis://HOST:PORT | --cluster redis://HOST:PORT,... "
                            + "[--sharded auto|on|off]) [--watchdog-ms N] [--fair-wait-ms N]");
        }
        // Small pools: the suite runs several drivers at once on a small machine. None of
        // these settings changes what a lock call sends or how it waits.
        config.setThreads(4).setNettyThreads(4);
        if (cluster != null) {
            config.useClusterServers()
                    .addNodeAddress(cluster.split(","))
                    .setShardedSubscriptionMode(
                            ShardedSubscriptionMode.valueOf(sharded.toUpperCase(Locale.ROOT)))
                    .setMasterConnectionMinimumIdleSize(2)
                    .setMasterConnectionPoolSize(16)
                    .setSubscriptionConnectionMinimumIdleSize(1);
        } else {
            config.useSingleServer()
                    .setAddress(url)
                    .setConnectionMinimumIdleSize(2)
                    .setConnectionPoolSize(16)
                    .setSubscriptionConnectionMinimumIdleSize(1);
        }
        RedissonClient redisson = Redisson.create(config);

        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        Driver driver = new Driver(redisson, out);
        Map<String, Object> ready = new LinkedHashMap<>();
        ready.put("event", "ready");
        ready.put("redisson", Redisson.class.getPackage().getImplementationVersion());
        ready.put("client_id", redisson.getId());
        ready.put("java", System.getProperty("java.version"));
        ready.put("pid", ProcessHandle.current().pid());
        ready.put("watchdog_ms", config.getLockWatchdogTimeout());
        ready.put("fair_wait_ms", config.getFairLockWaitTimeout());
        driver.emit(ready);

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (!line.isBlank()) {
                driver.dispatch(line.trim().split("\\s+"));
            }
        }
        // The test is gone (or done): no orderly shutdown, which could wait on the server.
        Runtime.getRuntime().halt(0);
    }

    /** Queues one request on its logical thread; a malformed one is answered at once. */
    private void dispatch(String[] words) {
        if (words.length < 3) {
            Map<String, Object> reply = new LinkedHashMap<>();
            reply.put("id", words.length > 0 ? words[0] : "");
            reply.put("ok", false);
            reply.put("error", "BadRequest");
            reply.put("message", "expected `<id> <thread> <op> [args]`, got " + String.join(" ", words));
            emit(reply);
            return;
        }
        String id = words[0];
        String thread = words[1];
        String[] request = Arrays.copyOfRange(words, 2, words.length);
        threads.computeIfAbsent(thread, name -> Executors.newSingleThreadExecutor(task -> {
            Thread t = new Thread(task, "driver-" + name);
            t.setDaemon(true);
            return t;
        })).execute(() -> run(id, thread, request));
    }

    /** Runs one request on the calling (logical) thread and prints its reply. */
    private void run(String id, String thread, String[] request) {
        Map<String, Object> reply = new LinkedHashMap<>();
        reply.put("id", Long.parseLong(id));
        reply.put("thread", thread);
        reply.put("thread_id", Thread.currentThread().getId());
        long start = nowMicros();
        try {
            Object value = execute(request);
            long end = nowMicros();
            reply.put("ok", true);
            reply.put("start_us", start);
            reply.put("end_us", end);
            reply.put("value", value);
        } catch (Exception e) {
            long end = nowMicros();
            reply.put("ok", false);
            reply.put("start_us", start);
            reply.put("end_us", end);
            reply.put("error", e.getClass().getSimpleName());
            reply.put("message", String.valueOf(e.getMessage()));
        }
        emit(reply);
    }

    private Object execute(String[] request) throws InterruptedException {
        if (request[0].equals("ping")) {
            return "pong";
        }
        if (request.length < 3) {
            throw new IllegalArgumentException("expected `<kind> <op> <name> [args]`");
        }
        String op = request[1];
        String name = request[2];
        String[] args = Arrays.copyOfRange(request, 3, request.length);
        if (Synchronizers.handles(request[0])) {
            return synchronizers.execute(request[0], op, name, args);
        }
        RLock lock = kind(request[0], name);
        return lockOp(lock, op, args);
    }

    /** The Redisson object of one kind; the next kinds of the family go here. */
    private RLock kind(String kind, String name) {
        return switch (kind) {
            case "lock" -> redisson.getLock(name);
            case "fair" -> redisson.getFairLock(name);
            case "fenced" -> redisson.getFencedLock(name);
            case "read" -> redisson.getReadWriteLock(name).readLock();
            case "write" -> redisson.getReadWriteLock(name).writeLock();
            default -> throw new IllegalArgumentException("unknown kind " + kind);
        };
    }

    private Object lockOp(RLock lock, String op, String[] args) throws InterruptedException {
        RFencedLock fenced = lock instanceof RFencedLock f ? f : null;
        switch (op) {
            case "lock" -> {
                if (fenced != null) {
                    // Redisson 3.52 ignores a lease given to lockAndGetToken, so none is taken.
                    requireArgs(args, 0);
                    return fenced.lockAndGetToken();
                }
                if (args.length == 1) {
                    lock.lock(Long.parseLong(args[0]), TimeUnit.MILLISECONDS);
                } else {
                    requireArgs(args, 0);
                    lock.lock();
                }
                return null;
            }
            case "trylock" -> {
                long wait = Long.parseLong(args[0]);
                long lease = args.length > 1 ? Long.parseLong(args[1]) : -1;
                if (fenced != null) {
                    return fenced.tryLockAndGetToken(wait, lease, TimeUnit.MILLISECONDS);
                }
                return lock.tryLock(wait, lease, TimeUnit.MILLISECONDS);
            }
            case "unlock" -> {
                lock.unlock();
                return null;
            }
            case "forceunlock" -> {
                return lock.forceUnlock();
            }
            case "holdcount" -> {
                return lock.getHoldCount();
            }
            case "held" -> {
                return lock.isHeldByCurrentThread();
            }
            case "locked" -> {
                return lock.isLocked();
            }
            case "ttl" -> {
                return lock.remainTimeToLive();
            }
            case "token" -> {
                if (fenced == null) {
                    throw new IllegalArgumentException("token: not a fenced lock");
                }
                return fenced.getToken();
            }
            case "firstattempt" -> {
                // What lock() sends before it subscribes, and no more: a waiter held in the
                // window between joining a fair queue and listening on its channel.
                requireArgs(args, 0);
                return DriverAccess.firstAttempt(lock, redisson.getConfig().getLockWatchdogTimeout());
            }
            case "exclusive" -> {
                requireArgs(args, 2);
                return exclusive(lock, args[0], Integer.parseInt(args[1]));
            }
            default -> throw new IllegalArgumentException("unknown op " + op);
        }
    }

    /** The mutual-exclusion workload (see the class docs); answers the overlaps seen. */
    private long exclusive(RLock lock, String counterKey, int rounds) {
        RBucket<String> counter = redisson.getBucket(counterKey, StringCodec.INSTANCE);
        RAtomicLong inside = redisson.getAtomicLong(counterKey + ":inside");
        long overlaps = 0;
        for (int i = 0; i < rounds; i++) {
            lock.lock();
            try {
                if (inside.incrementAndGet() != 1) {
                    overlaps++;
                }
                String value = counter.get();
                counter.set(Long.toString(value == null ? 1 : Long.parseLong(value) + 1));
                inside.decrementAndGet();
            } finally {
                lock.unlock();
            }
        }
        return overlaps;
    }

    private static void requireArgs(String[] args, int n) {
        if (args.length != n) {
            throw new IllegalArgumentException("expected " + n + " arguments, got " + args.length);
        }
    }

    private static long nowMicros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
    }

    /** Prints one JSON line; a closed stdout means the test is gone. */
    private synchronized void emit(Map<String, Object> fields) {
        out.println(Json.write(fields));
        out.flush();
        if (out.checkError()) {
            Runtime.getRuntime().halt(0);
        }
    }
}
