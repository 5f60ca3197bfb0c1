package redisrlock.interop;

import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;

/**
 * Warms the JIT on a workload until compilation is quiet: rounds of the workload run until
 * the JVM's total compilation time ({@link CompilationMXBean#getTotalCompilationTime()}) has
 * not grown for a quiet window, or until a bound on the whole warm-up. A fixed count of
 * warm-up rounds would be too few on a loaded machine (C2 compiles later) and needlessly
 * many on a quiet one; measuring while the compiler still works would time the
 * interpreter and the compiler threads' CPU beside Redisson.
 */
final class JitWarmup {
    /** How one warm-up went, for the output. */
    record Outcome(double seconds, long rounds, long compilationMs, boolean quiet, double quietS) {
        JsonLine into(JsonLine line) {
            return line.num("warmup_s", seconds, 1)
                    .raw("warmup_rounds", rounds)
                    .raw("jit_compilation_ms", compilationMs)
                    .bool("jit_quiet", quiet)
                    .num("jit_quiet_window_s", quietS, 1);
        }
    }

    /** One round of the workload. */
    interface Round {
        void run() throws Exception;
    }

    private JitWarmup() {
    }

    /**
     * Runs {@code round} until compilation has been quiet for {@code quietMs} after at least
     * {@code minRounds} rounds, or for {@code maxMs} in all. Where the JVM does not monitor
     * compilation time, runs for {@code maxMs} and says it was not seen quiet.
     */
    static Outcome warm(Round round, long minRounds, long quietMs, long maxMs) throws Exception {
        CompilationMXBean jit = ManagementFactory.getCompilationMXBean();
        boolean monitored = jit != null && jit.isCompilationTimeMonitoringSupported();
        long started = System.nanoTime();
        long lastTotal = monitored ? jit.getTotalCompilationTime() : 0;
        long lastGrowth = started;
        long rounds = 0;
        boolean quiet = false;
        while (true) {
            round.run();
            rounds++;
            long now = System.nanoTime();
            if (monitored) {
                long total = jit.getTotalCompilationTime();
                if (total != lastTotal) {
                    lastTotal = total;
                    lastGrowth = now;
                }
                if (rounds >= minRounds && now - lastGrowth >= quietMs * 1_000_000) {
                    quiet = true;
                    break;
                }
            }
            if (now - started >= maxMs * 1_000_000) {
                break;
            }
        }
        return new Outcome((System.nanoTime() - started) / 1e9, rounds, lastTotal, quiet, quietMs / 1e3);
    }
}
