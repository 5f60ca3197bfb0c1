//! Statistics and the process's own counters: CPU time, context switches, memory.

/// The value at fraction `p` of `sorted` (not empty).
pub fn at(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// `values`, sorted.
pub fn sorted(mut values: Vec<f64>) -> Vec<f64> {
    values.sort_by(|a, b| a.total_cmp(b));
    values
}

fn clock_micros(clock: libc::clockid_t) -> f64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec to write to; the clock id is a constant.
    unsafe { libc::clock_gettime(clock, &mut now) };
    now.tv_sec as f64 * 1e6 + now.tv_nsec as f64 / 1e3
}

/// CPU time of the whole client process so far (every runtime thread), in µs: unlike wall
/// time, it does not swing with what else the machine runs.
pub fn process_cpu_micros() -> f64 {
    clock_micros(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// Context switches of every thread of this process so far, voluntary or not, from
/// `/proc/self/task/*/status`. On one CPU, each hand-off between two threads (a runtime's
/// threads, or the client and the server) is one.
pub fn context_switches() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("status")).ok())
        .flat_map(|status| {
            status
                .lines()
                .filter(|line| line.contains("ctxt_switches:"))
                .filter_map(|line| line.split(':').nth(1)?.trim().parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .sum()
}

/// Resident memory of this process, in bytes.
pub fn rss_bytes() -> i64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// The counters read around a measured stretch of work.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counters {
    pub cpu_micros: f64,
    pub context_switches: u64,
    pub unparks: u64,
}

/// Whether the counters are read at all: `NO_COUNTERS` leaves them at 0, so that a run
/// under callgrind counts the pairs' instructions only.
fn counted() -> bool {
    static COUNTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *COUNTED.get_or_init(|| std::env::var_os("NO_COUNTERS").is_none())
}

impl Counters {
    pub fn now() -> Counters {
        if !counted() {
            return Counters::default();
        }
        Counters {
            context_switches: context_switches(),
            unparks: crate::common::runtime::unparks(),
            cpu_micros: process_cpu_micros(),
        }
    }

    /// What was counted since `before`.
    pub fn since(before: Counters) -> Counters {
        if !counted() {
            return Counters::default();
        }
        let cpu_micros = process_cpu_micros();
        Counters {
            cpu_micros: cpu_micros - before.cpu_micros,
            unparks: crate::common::runtime::unparks() - before.unparks,
            context_switches: context_switches() - before.context_switches,
        }
    }

    pub fn add(&mut self, other: Counters) {
        self.cpu_micros += other.cpu_micros;
        self.context_switches += other.context_switches;
        self.unparks += other.unparks;
    }
}

/// What W1 measured of one contender: each pair's time, and the counters over all of them.
pub struct Figures {
    pub id: &'static str,
    pub name: &'static str,
    pub micros: Vec<f64>,
    pub counters: Counters,
}

impl Figures {
    pub fn new(id: &'static str, name: &'static str, pairs: usize) -> Figures {
        Figures {
            id,
            name,
            micros: Vec::with_capacity(pairs),
            counters: Counters::default(),
        }
    }

    /// Sorts the times, for [`Figures::percentile`].
    pub fn finish(&mut self) {
        self.micros.sort_by(|a, b| a.total_cmp(b));
    }

    /// After [`Figures::finish`].
    pub fn percentile(&self, p: f64) -> f64 {
        at(&self.micros, p)
    }

    pub fn ops_per_sec(&self) -> f64 {
        self.micros.len() as f64 / (self.micros.iter().sum::<f64>() / 1e6)
    }

    fn per_pair(&self, total: f64) -> f64 {
        total / self.micros.len() as f64
    }

    /// Client CPU (every thread of the process) per pair, in µs.
    pub fn cpu_per_pair(&self) -> f64 {
        self.per_pair(self.counters.cpu_micros)
    }

    pub fn switches_per_pair(&self) -> f64 {
        self.per_pair(self.counters.context_switches as f64)
    }

    pub fn unparks_per_pair(&self) -> f64 {
        self.per_pair(self.counters.unparks as f64)
    }
}
