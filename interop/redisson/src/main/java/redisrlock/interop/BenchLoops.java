package redisrlock.interop;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.Supplier;

import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;

/**
 * The workloads of the project's BENCHMARKS.md as Redisson users run them, one run at a
 * time, each adding to a {@link BenchFigures}:
 * <ul>
 *   <li>W1: one caller, lock + unlock on one key, a given number of pairs, each timed;
 *   <li>W2: {@value #W2_CALLERS} callers, one key each, lock + unlock until the run's end,
 *       each pair timed;
 *   <li>W3: {@value #W3_CALLERS} callers on one key: lock (blocking, defaults), hold 1 ms (a
 *       thread sleep), unlock, until the run's end; each wait timed.
 * </ul>
 * A blocking API's callers are platform threads; an async API's are chains of stages, each
 * step started when the one before completes, with an owner id of their own.
 */
final class BenchLoops {
    static final int W2_CALLERS = 32;
    static final int W3_CALLERS = 8;

    private final RedissonClient redisson;
    /**
     * Where async W3 callers hold the lock: a thread sleep, as the Rust side sleeps on
     * tokio's blocking pool, so that neither holds a Netty thread for the millisecond.
     */
    private final ExecutorService holds = Executors.newCachedThreadPool(task -> {
        Thread t = new Thread(task, "bench-hold");
        t.setDaemon(true);
        return t;
    });

    BenchLoops(RedissonClient redisson) {
        this.redisson = redisson;
    }

    /** One run of {@code workload}: W1 {@code amount} pairs, W2 and W3 {@code amount} ms. */
    void run(String workload, BenchApi api, long amount, BenchFigures figures) throws Exception {
        long cpu = BenchFigures.processCpuNs();
        long started = System.nanoTime();
        BenchFigures.Samples[] callers = switch (workload) {
            case "w1" -> new BenchFigures.Samples[] {w1(api, amount)};
            case "w2" -> w2(api, started + amount * 1_000_000);
            case "w3" -> w3(api, started + amount * 1_000_000);
            default -> throw new IllegalArgumentException("unknown workload " + workload + " (w1, w2, w3)");
        };
        double runS = (System.nanoTime() - started) / 1e9;
        long cpuNs = cpu < 0 ? -1 : BenchFigures.processCpuNs() - cpu;
        figures.add(callers, runS, cpuNs);
    }

    private String key(String workload, BenchApi api) {
        return "bench:redisson:" + workload + ":" + api.id;
    }

    private BenchFigures.Samples w1(BenchApi api, long pairs) {
        RLock lock = api.lock(redisson, key("w1", api));
        long owner = api.async ? BenchApi.ASYNC_OWNERS : Thread.currentThread().getId();
        BenchFigures.Samples micros = new BenchFigures.Samples();
        for (long i = 0; i < pairs; i++) {
            long began = System.nanoTime();
            api.pair(lock, owner);
            micros.add(since(began) * 1e6);
        }
        return micros;
    }

    private BenchFigures.Samples[] w2(BenchApi api, long deadline) throws Exception {
        List<RLock> locks = new ArrayList<>();
        for (int i = 0; i < W2_CALLERS; i++) {
            locks.add(api.lock(redisson, key("w2", api) + ":" + i));
        }
        if (api.async) {
            return chains(W2_CALLERS, deadline, i -> {
                RLock lock = locks.get(i);
                long owner = BenchApi.ASYNC_OWNERS + i;
                return () -> {
                    long began = System.nanoTime();
                    return BenchApi.asyncPair(lock, owner).thenApply(v -> since(began) * 1e6);
                };
            });
        }
        return threads(W2_CALLERS, i -> () -> {
            RLock lock = locks.get(i);
            BenchFigures.Samples micros = new BenchFigures.Samples();
            while (System.nanoTime() < deadline) {
                long began = System.nanoTime();
                lock.lock();
                lock.unlock();
                micros.add(since(began) * 1e6);
            }
            return micros;
        });
    }

    private BenchFigures.Samples[] w3(BenchApi api, long deadline) throws Exception {
        RLock lock = api.lock(redisson, key("w3", api));
        if (api.async) {
            return chains(W3_CALLERS, deadline, i -> {
                long owner = BenchApi.ASYNC_OWNERS + i;
                return () -> {
                    long asked = System.nanoTime();
                    return lock.lockAsync(owner).thenCompose(v -> {
                        double waited = since(asked) * 1e3;
                        return CompletableFuture.runAsync(BenchLoops::hold, holds)
                                .thenCompose(held -> lock.unlockAsync(owner))
                                .thenApply(unlocked -> waited);
                    });
                };
            });
        }
        return threads(W3_CALLERS, i -> () -> {
            BenchFigures.Samples waits = new BenchFigures.Samples();
            while (System.nanoTime() < deadline) {
                long asked = System.nanoTime();
                lock.lock();
                waits.add(since(asked) * 1e3);
                hold();
                lock.unlock();
            }
            return waits;
        });
    }

    /** What a W3 holder does with the lock: 1 ms of sleep. */
    private static void hold() {
        try {
            Thread.sleep(1);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static double since(long began) {
        return (System.nanoTime() - began) / 1e9;
    }

    /** A caller that runs until its run's end and returns its samples. */
    private interface Caller {
        BenchFigures.Samples call() throws Exception;
    }

    private interface Callers<T> {
        T of(int index);
    }

    /** {@code n} platform threads, one per caller, all started before any is awaited. */
    private static BenchFigures.Samples[] threads(int n, Callers<Caller> callers) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(n, task -> {
            Thread t = new Thread(task, "bench-caller");
            t.setDaemon(true);
            return t;
        });
        try {
            List<Future<BenchFigures.Samples>> running = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                Caller caller = callers.of(i);
                running.add(pool.submit(caller::call));
            }
            BenchFigures.Samples[] samples = new BenchFigures.Samples[n];
            for (int i = 0; i < n; i++) {
                samples[i] = unwrap(running.get(i));
            }
            return samples;
        } finally {
            pool.shutdown();
        }
    }

    /**
     * {@code n} async callers: each repeats its step (a stage giving one sample) until the
     * deadline, starting the next step from the completion of the one before.
     */
    private static BenchFigures.Samples[] chains(
            int n, long deadline, Callers<Supplier<CompletionStage<Double>>> steps) throws Exception {
        List<CompletableFuture<BenchFigures.Samples>> running = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            CompletableFuture<BenchFigures.Samples> done = new CompletableFuture<>();
            next(steps.of(i), deadline, new BenchFigures.Samples(), done);
            running.add(done);
        }
        BenchFigures.Samples[] samples = new BenchFigures.Samples[n];
        for (int i = 0; i < n; i++) {
            samples[i] = unwrap(running.get(i));
        }
        return samples;
    }

    private static void next(
            Supplier<CompletionStage<Double>> step,
            long deadline,
            BenchFigures.Samples samples,
            CompletableFuture<BenchFigures.Samples> done) {
        if (System.nanoTime() >= deadline) {
            done.complete(samples);
            return;
        }
        step.get().whenComplete((sample, error) -> {
            if (error != null) {
                done.completeExceptionally(error);
                return;
            }
            samples.add(sample);
            next(step, deadline, samples, done);
        });
    }

    /** A caller's samples, or the exception that stopped it. */
    private static BenchFigures.Samples unwrap(Future<BenchFigures.Samples> caller) throws Exception {
        try {
            return caller.get();
        } catch (ExecutionException e) {
            throw e.getCause() instanceof Exception cause ? cause : e;
        }
    }
}
