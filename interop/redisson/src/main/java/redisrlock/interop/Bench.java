package redisrlock.interop;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Collectors;

import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;
import org.redisson.config.SingleServerConfig;

/**
 * Redisson's side of the crate's benchmarks (W1–W3 of BENCHMARKS.md), with Redisson's
 * defaults as users get them (only the address set), on one Redis.
 *
 * <p>One workload: {@code java -cp redisson-driver.jar redisrlock.interop.Bench --url
 * redis://127.0.0.1:PORT --workload w1|w2|w3 --api lock|lock_async|fair [--pairs N]
 * [--seconds S] [--warmup-max-s S] [--quiet-s S]} warms the JIT on the workload until
 * compilation is quiet ({@link JitWarmup}), measures it (W1: {@code --pairs}, 10,000 by
 * default; W2, W3: {@code --seconds}, 5 by default) and prints one JSON line of results,
 * {@code {"event":"result","workload":"W1","api":"lock",...}}, with the warm-up's figures.
 *
 * <p>{@code --serve} in place of {@code --workload} and {@code --api}: the Rust benchmark
 * ({@code benches/redisson.rs}) runs Redisson in turns with the crate, so the JVM stays up
 * and takes one request per line on stdin, answering each with one JSON line once done:
 * <ul>
 *   <li>{@code warm W API[,API...]}: warms on the workload, the APIs in turns, until
 *       compilation is quiet: {@code {"event":"warmed",...}};
 *   <li>{@code run W API AMOUNT}: one run (W1: AMOUNT pairs; W2, W3: AMOUNT ms), its figures
 *       kept: {@code {"event":"ran",...}};
 *   <li>{@code report W API}: the result line of the runs so far, which it then forgets.
 * </ul>
 * It prints {@code {"event":"ready",...}} first (Redisson's and Java's versions, CPUs, GC,
 * Redisson's thread and pool sizes), {@code {"event":"error",...}} for a failed request,
 * and exits when stdin closes.
 */
public final class Bench {
    private final BenchLoops loops;
    private final PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
    private final Map<String, BenchFigures> figures = new HashMap<>();
    /** The last warm-up of each workload, repeated in its result lines. */
    private final Map<String, JitWarmup.Outcome> warmups = new HashMap<>();
    private final long quietMs;
    private final long warmupMaxMs;

    private Bench(RedissonClient redisson, long quietMs, long warmupMaxMs) {
        this.loops = new BenchLoops(redisson);
        this.quietMs = quietMs;
        this.warmupMaxMs = warmupMaxMs;
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> options = new HashMap<>();
        boolean serve = false;
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--serve")) {
                serve = true;
            } else if (args[i].startsWith("--") && i + 1 < args.length) {
                options.put(args[i].substring(2), args[++i]);
            } else {
                throw new IllegalArgumentException("unexpected argument " + args[i]);
            }
        }
        String url = options.get("url");
        if (url == null || serve == options.containsKey("workload")) {
            throw new IllegalArgumentException("usage: --url redis://HOST:PORT (--serve | --workload w1|w2|w3 "
                    + "--api lock|lock_async|fair [--pairs N] [--seconds S]) [--warmup-max-s S] [--quiet-s S]");
        }
        Config config = new Config();
        SingleServerConfig server = config.useSingleServer().setAddress(url);
        Bench bench = new Bench(
                Redisson.create(config),
                seconds(options.getOrDefault("quiet-s", "2")),
                seconds(options.getOrDefault("warmup-max-s", "60")));
        bench.emit(new JsonLine().str("event", "ready")
                .str("redisson", Redisson.class.getPackage().getImplementationVersion())
                .str("java", System.getProperty("java.version"))
                .raw("cpus", Runtime.getRuntime().availableProcessors())
                .str("gc", ManagementFactory.getGarbageCollectorMXBeans().stream()
                        .map(GarbageCollectorMXBean::getName)
                        .collect(Collectors.joining(", ")))
                .raw("threads", config.getThreads())
                .raw("netty_threads", config.getNettyThreads())
                .raw("connection_pool", server.getConnectionPoolSize())
                .raw("pid", ProcessHandle.current().pid()));
        if (serve) {
            bench.serve();
        } else {
            String workload = options.get("workload").toLowerCase(Locale.ROOT);
            BenchApi api = BenchApi.of(options.getOrDefault("api", "lock"));
            bench.warm(workload, List.of(api));
            long amount = workload.equals("w1")
                    ? Long.parseLong(options.getOrDefault("pairs", "10000"))
                    : seconds(options.getOrDefault("seconds", "5"));
            bench.loops.run(workload, api, amount, bench.figuresOf(workload, api));
            bench.emit(bench.report(workload, api));
        }
        // No orderly shutdown, which could wait on the server: nothing is held.
        Runtime.getRuntime().halt(0);
    }

    private static long seconds(String value) {
        return Math.round(Double.parseDouble(value) * 1000);
    }

    /** Answers requests until stdin closes. */
    private void serve() throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            String[] words = line.trim().split("\\s+");
            try {
                emit(answer(words));
            } catch (Exception e) {
                emit(new JsonLine().str("event", "error")
                        .str("request", line.trim())
                        .str("error", e.getClass().getSimpleName())
                        .str("message", String.valueOf(e.getMessage())));
            }
        }
    }

    private JsonLine answer(String[] words) throws Exception {
        if (words.length < 3) {
            throw new IllegalArgumentException("expected `warm|run|report W API [AMOUNT]`");
        }
        String workload = words[1].toLowerCase(Locale.ROOT);
        switch (words[0]) {
            case "warm" -> {
                List<BenchApi> apis = new ArrayList<>();
                for (String id : words[2].split(",")) {
                    apis.add(BenchApi.of(id));
                }
                JitWarmup.Outcome outcome = warm(workload, apis);
                return outcome.into(new JsonLine().str("event", "warmed")
                        .str("workload", workload.toUpperCase(Locale.ROOT))
                        .str("apis", words[2]));
            }
            case "run" -> {
                if (words.length != 4) {
                    throw new IllegalArgumentException("expected `run W API AMOUNT`");
                }
                BenchApi api = BenchApi.of(words[2]);
                BenchFigures kept = figuresOf(workload, api);
                int before = kept.count();
                long started = System.nanoTime();
                loops.run(workload, api, Long.parseLong(words[3]), kept);
                return new JsonLine().str("event", "ran")
                        .str("workload", workload.toUpperCase(Locale.ROOT))
                        .str("api", api.id)
                        .raw("samples", kept.count() - before)
                        .num("run_s", (System.nanoTime() - started) / 1e9, 3);
            }
            case "report" -> {
                return report(workload, BenchApi.of(words[2]));
            }
            default -> throw new IllegalArgumentException("unknown request " + words[0]);
        }
    }

    /**
     * Warms the JIT on {@code workload}, a round being one short run of each API in turn
     * (W1: 100 pairs; W2, W3: 250 ms), at least 5 rounds for W1 (500 pairs of each, the
     * crate's W1 warm-up) and 2 for W2 and W3. The warm-up's samples are dropped.
     */
    private JitWarmup.Outcome warm(String workload, List<BenchApi> apis) throws Exception {
        boolean pairs = workload.equals("w1");
        long amount = pairs ? 100 : 250;
        JitWarmup.Outcome outcome = JitWarmup.warm(() -> {
            for (BenchApi api : apis) {
                loops.run(workload, api, amount, new BenchFigures(workload, api));
            }
        }, pairs ? 5 : 2, quietMs, warmupMaxMs);
        warmups.put(workload, outcome);
        return outcome;
    }

    private BenchFigures figuresOf(String workload, BenchApi api) {
        return figures.computeIfAbsent(workload + " " + api.id, k -> new BenchFigures(workload, api));
    }

    /** The result line of {@code api}'s runs of {@code workload}; forgets them. */
    private JsonLine report(String workload, BenchApi api) {
        BenchFigures kept = figures.remove(workload + " " + api.id);
        if (kept == null || kept.count() == 0) {
            throw new IllegalStateException("nothing measured for " + workload + " " + api.id);
        }
        JsonLine line = kept.result(new JsonLine().str("event", "result"))
                .str("redisson", Redisson.class.getPackage().getImplementationVersion());
        JitWarmup.Outcome warmup = warmups.get(workload);
        return warmup == null ? line : warmup.into(line);
    }

    /** Prints one JSON line; a closed stdout means the benchmark is gone. */
    private void emit(JsonLine line) {
        out.println(line);
        out.flush();
        if (out.checkError()) {
            Runtime.getRuntime().halt(0);
        }
    }
}
