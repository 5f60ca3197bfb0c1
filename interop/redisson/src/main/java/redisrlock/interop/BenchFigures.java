package redisrlock.interop;

import java.lang.management.ManagementFactory;
import java.lang.management.OperatingSystemMXBean;
import java.util.Arrays;

/**
 * What {@link Bench} measured of one workload and API over one or more runs (the turns the
 * Rust side gives it), and its result line: the same figures, computed the same way, as the
 * Rust benchmarks print for the crate (percentiles as {@code benches/common/stats.rs}
 * takes them).
 */
final class BenchFigures {
    /** One caller's samples: pair times in µs (W1, W2) or waits in ms (W3). */
    static final class Samples {
        private double[] values = new double[1024];
        private int count;

        void add(double value) {
            if (count == values.length) {
                values = Arrays.copyOf(values, count * 2);
            }
            values[count++] = value;
        }

        int count() {
            return count;
        }
    }

    private final String workload;
    private final BenchApi api;
    private Samples samples = new Samples();
    /** Samples of each caller, summed over the runs. */
    private long[] perCaller = new long[0];
    /** Wall time of the runs (W2, W3), s. */
    private double elapsedS;
    /** The JVM's CPU time over the runs (every thread: callers, Netty, JIT, GC), ns. */
    private long cpuNs;

    BenchFigures(String workload, BenchApi api) {
        this.workload = workload;
        this.api = api;
    }

    /** Adds one run: each caller's samples, its wall time and the JVM's CPU time in it. */
    void add(Samples[] callers, double runS, long runCpuNs) {
        if (perCaller.length < callers.length) {
            perCaller = Arrays.copyOf(perCaller, callers.length);
        }
        for (int i = 0; i < callers.length; i++) {
            perCaller[i] += callers[i].count;
            for (int j = 0; j < callers[i].count; j++) {
                samples.add(callers[i].values[j]);
            }
        }
        elapsedS += runS;
        cpuNs += runCpuNs;
    }

    int count() {
        return samples.count;
    }

    /** CPU time of the whole JVM so far, ns, or -1 where the JVM does not say. */
    static long processCpuNs() {
        OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean hotspot) {
            return hotspot.getProcessCpuTime();
        }
        return -1;
    }

    /** The result line's figures, after {@code head}'s fields. */
    JsonLine result(JsonLine head) {
        double[] sorted = Arrays.copyOf(samples.values, samples.count);
        Arrays.sort(sorted);
        int n = sorted.length;
        head.str("workload", workload.toUpperCase(java.util.Locale.ROOT))
                .str("api", api.id)
                .str("contender", "Redisson " + api.described)
                .raw("callers", perCaller.length);
        double cpuPerSample = cpuNs < 0 || n == 0 ? Double.NaN : cpuNs / 1e3 / n;
        switch (workload) {
            case "w1" -> head.raw("pairs", n)
                    .num("p50_us", at(sorted, 0.5), 1)
                    .num("p99_us", at(sorted, 0.99), 1)
                    .num("ops_per_s", n / (Arrays.stream(sorted).sum() / 1e6), 0)
                    .num("client_cpu_us_per_pair", cpuPerSample, 1);
            case "w2" -> head.raw("pairs", n)
                    .num("run_s", elapsedS, 1)
                    .num("pairs_per_s", n / elapsedS, 0)
                    .num("p50_us", at(sorted, 0.5), 1)
                    .num("p99_us", at(sorted, 0.99), 1)
                    .num("client_cpu_us_per_pair", cpuPerSample, 2);
            default -> head.raw("acquisitions", n)
                    .num("run_s", elapsedS, 1)
                    .num("acquisitions_per_s", n / elapsedS, 0)
                    .num("wait_p50_ms", at(sorted, 0.5), 2)
                    .num("wait_p99_ms", at(sorted, 0.99), 2)
                    .num("wait_max_ms", n == 0 ? Double.NaN : sorted[n - 1], 2)
                    .raw("per_task_min", Arrays.stream(perCaller).min().orElse(0))
                    .raw("per_task_max", Arrays.stream(perCaller).max().orElse(0))
                    .num("client_cpu_us_per_pair", cpuPerSample, 2);
        }
        return head;
    }

    private static double at(double[] sorted, double p) {
        if (sorted.length == 0) {
            return Double.NaN;
        }
        return sorted[(int) Math.round((sorted.length - 1) * p)];
    }
}
