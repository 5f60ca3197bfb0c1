//! The settings of a run: the lock clients' timing, what a worker is told when it starts,
//! and how the checker's bounds follow from both.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use super::backend::Mode;
use super::events::WorkerId;

/// The environment variable that turns a process into a worker. Its value is the worker's
/// [`WorkerSpec`]; without it the worker entry point returns at once.
pub const WORKER_ENV: &str = "REDIS_RLOCK_TORTURE_WORKER";

/// Lock-client settings and the shape of the workers' critical sections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timing {
    /// The watchdog timeout: the lease of every acquisition.
    pub lease: Duration,
    /// The lock client's `response_timeout`.
    pub response_timeout: Duration,
    /// The lock client's `connect_timeout`.
    pub connect_timeout: Duration,
    /// The lock client's `subscribe_timeout`.
    pub subscribe_timeout: Duration,
    /// The lock client's `retry_attempts`.
    pub retry_attempts: u32,
    /// The lock client's `retry_delay`.
    pub retry_delay: Duration,
    /// How long each `try_lock_for` waits.
    pub acquire_wait: Duration,
    /// Fenced writes per critical section.
    pub writes_per_section: u32,
    /// The work before each write, chosen at random in this range.
    pub work_between_writes: (Duration, Duration),
    /// One section in this many is long (0: none): its work before each write is drawn
    /// from `long_work_between_writes`, so that the watchdog keeps the lock over several
    /// leases and faults catch holders deep inside their sections.
    pub long_section_one_in: u32,
    /// The work before each write of a long section.
    pub long_work_between_writes: (Duration, Duration),
    /// The pause after an unlock before asking again, chosen at random in this range, so
    /// that the lock changes hands between workers.
    pub pause_after_unlock: (Duration, Duration),
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            lease: Duration::from_millis(1000),
            response_timeout: Duration::from_millis(500),
            connect_timeout: Duration::from_millis(1000),
            subscribe_timeout: Duration::from_millis(2000),
            retry_attempts: 3,
            retry_delay: Duration::from_millis(50),
            acquire_wait: Duration::from_millis(2000),
            writes_per_section: 4,
            work_between_writes: (Duration::from_millis(10), Duration::from_millis(40)),
            long_section_one_in: 12,
            long_work_between_writes: (Duration::from_millis(250), Duration::from_millis(700)),
            pause_after_unlock: (Duration::from_millis(5), Duration::from_millis(30)),
        }
    }
}

/// How long each thing may take before the checker calls it a hang or a failure, from the
/// timing. Generous on purpose: the run must pass on a loaded 2-core machine, and a real
/// hang lasts forever, so it is caught however generous the bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// One `try_lock_for` call.
    pub acquire: Duration,
    /// One fenced write.
    pub write: Duration,
    /// One `unlock()` call.
    pub unlock: Duration,
    /// The longest a live, running worker may go without reporting anything.
    pub silence: Duration,
    /// From the end of a fault to the next acquisition by anyone.
    pub reacquire: Duration,
    /// From the end of a pause or outage that outlived the lease to the holder it cut off
    /// learning that it lost the lock.
    pub told: Duration,
    /// From asking the workers to stop to their exit.
    pub worker_exit: Duration,
}

/// Slack added to every bound for a busy machine's scheduling delays.
const SLACK: Duration = Duration::from_secs(3);

impl Bounds {
    /// The bounds that follow from `timing`.
    pub fn of(timing: &Timing) -> Bounds {
        let attempts = timing.retry_attempts;
        // A command that fails may fail after its connect and response timeouts, then
        // pause up to twice the retry delay (delay plus jitter).
        let one_try = timing.connect_timeout + timing.response_timeout + timing.retry_delay * 2;
        let command = one_try * attempts + SLACK;
        let acquire = timing.acquire_wait + timing.subscribe_timeout + command;
        // The resource is never faulted: a write takes far less than a second.
        let longest_work = timing
            .work_between_writes
            .1
            .max(timing.long_work_between_writes.1);
        let section = (longest_work + Duration::from_secs(1)) * timing.writes_per_section;
        Bounds {
            acquire,
            write: RESOURCE_COMMAND_BOUND + SLACK,
            unlock: command,
            silence: (acquire + SLACK).max(Duration::from_secs(20)),
            // A holder the fault spared may finish its section first; one it paused or
            // killed holds the lock until its lease runs out; then a waiter's acquire returns.
            reacquire: section + timing.lease + acquire + SLACK,
            // The deadline has passed by then: `lost()` resolves at its next poll.
            told: SLACK * 2,
            worker_exit: acquire + section + command + SLACK * 2,
        }
    }
}

/// The longest one resource write may take: the resource server is never faulted, so this
/// is its client's response timeout times its attempts, and some.
pub const RESOURCE_COMMAND_BOUND: Duration = Duration::from_secs(7);

/// Everything a worker process is told when it starts, carried in [`WORKER_ENV`] as
/// `key=value` pairs separated by spaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerSpec {
    /// Its id in events.
    pub id: WorkerId,
    /// Which lock it takes.
    pub mode: Mode,
    /// The lock servers' URLs.
    pub lock_urls: Vec<String>,
    /// The resource server's URL.
    pub resource_url: String,
    /// Seeds its random work lengths.
    pub seed: u64,
    /// It stops by itself after this long, should nobody tell it to.
    pub lifetime: Duration,
    /// Lock-client settings and section shape.
    pub timing: Timing,
}

impl WorkerSpec {
    /// The value of [`WORKER_ENV`] that describes this worker.
    pub fn encode(&self) -> String {
        let t = &self.timing;
        let ms = |d: Duration| d.as_millis().to_string();
        let pairs: Vec<(&str, String)> = vec![
            ("id", self.id.to_string()),
            ("mode", self.mode.name().to_string()),
            ("lock", self.lock_urls.join(",")),
            ("resource", self.resource_url.clone()),
            ("seed", self.seed.to_string()),
            ("lifetime_ms", ms(self.lifetime)),
            ("lease_ms", ms(t.lease)),
            ("response_ms", ms(t.response_timeout)),
            ("connect_ms", ms(t.connect_timeout)),
            ("subscribe_ms", ms(t.subscribe_timeout)),
            ("attempts", t.retry_attempts.to_string()),
            ("retry_ms", ms(t.retry_delay)),
            ("wait_ms", ms(t.acquire_wait)),
            ("writes", t.writes_per_section.to_string()),
            ("work_min_ms", ms(t.work_between_writes.0)),
            ("work_max_ms", ms(t.work_between_writes.1)),
            ("long_one_in", t.long_section_one_in.to_string()),
            ("long_work_min_ms", ms(t.long_work_between_writes.0)),
            ("long_work_max_ms", ms(t.long_work_between_writes.1)),
            ("rest_min_ms", ms(t.pause_after_unlock.0)),
            ("rest_max_ms", ms(t.pause_after_unlock.1)),
        ];
        pairs
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Reads a spec written by [`encode`](WorkerSpec::encode).
    pub fn decode(text: &str) -> Result<WorkerSpec, String> {
        let pairs: BTreeMap<&str, &str> = text
            .split_whitespace()
            .filter_map(|w| w.split_once('='))
            .collect();
        let text_of = |k: &str| {
            pairs
                .get(k)
                .copied()
                .ok_or_else(|| format!("worker spec without `{k}`: {text}"))
        };
        let number = |k: &str| -> Result<u64, String> {
            text_of(k)?
                .parse()
                .map_err(|e| format!("worker spec `{k}`: {e}"))
        };
        let ms = |k: &str| number(k).map(Duration::from_millis);
        Ok(WorkerSpec {
            id: WorkerId::try_from(number("id")?).map_err(|e| e.to_string())?,
            mode: Mode::parse(text_of("mode")?)?,
            lock_urls: text_of("lock")?.split(',').map(str::to_string).collect(),
            resource_url: text_of("resource")?.to_string(),
            seed: number("seed")?,
            lifetime: ms("lifetime_ms")?,
            timing: Timing {
                lease: ms("lease_ms")?,
                response_timeout: ms("response_ms")?,
                connect_timeout: ms("connect_ms")?,
                subscribe_timeout: ms("subscribe_ms")?,
                retry_attempts: u32::try_from(number("attempts")?).map_err(|e| e.to_string())?,
                retry_delay: ms("retry_ms")?,
                acquire_wait: ms("wait_ms")?,
                writes_per_section: u32::try_from(number("writes")?).map_err(|e| e.to_string())?,
                work_between_writes: (ms("work_min_ms")?, ms("work_max_ms")?),
                long_section_one_in: u32::try_from(number("long_one_in")?)
                    .map_err(|e| e.to_string())?,
                long_work_between_writes: (ms("long_work_min_ms")?, ms("long_work_max_ms")?),
                pause_after_unlock: (ms("rest_min_ms")?, ms("rest_max_ms")?),
            },
        })
    }
}

/// How to start a worker process: this same program, told by [`WORKER_ENV`] to be one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerCommand {
    /// The program: the running executable.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
}

impl WorkerCommand {
    /// Re-runs the current program with `args`.
    pub fn this_program(args: &[&str]) -> WorkerCommand {
        WorkerCommand {
            program: current_exe(),
            args: args.iter().map(|a| a.to_string()).collect(),
        }
    }
}

fn current_exe() -> PathBuf {
    std::env::current_exe().expect("the running program's path, to start workers from it")
}

/// One torture run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunConfig {
    /// Which lock is tortured.
    pub mode: Mode,
    /// How long faults are injected.
    pub duration: Duration,
    /// Worker processes running at any time (a killed one is replaced).
    pub workers: usize,
    /// Seeds the fault schedule and the workers' randomness; printed so a run can be
    /// repeated.
    pub seed: u64,
    /// Keep injecting past `duration`, up to three times as long, until every fault kind
    /// has hit at least once: for the short run, which must show each kind.
    pub every_kind_at_least_once: bool,
    /// The quiet time between the recovery from one fault and the next, chosen at random in
    /// this range.
    pub between_faults: (Duration, Duration),
    /// How long a paused holder stays stopped, chosen at random in this range: always past
    /// the lease, from just past it (a renewal may be on its way when the pause begins) to
    /// long past it (others have taken the lock and written meanwhile).
    pub pauses: (Duration, Duration),
    /// How long a crashed lock server stays down before it restarts, chosen at random in
    /// this range: shorter than the lease (holders keep their locks) or longer (they lose
    /// them, and must be told).
    pub outages: (Duration, Duration),
    /// Lock-client settings and section shape.
    pub timing: Timing,
    /// How workers are started.
    pub worker_command: WorkerCommand,
    /// Print each fault as it is injected, for long runs watched by a person.
    pub verbose: bool,
}

impl RunConfig {
    /// A run of `duration` with `workers` workers and the default timing.
    pub fn new(worker_command: WorkerCommand, duration: Duration, workers: usize) -> RunConfig {
        let timing = Timing::default();
        let lease = timing.lease;
        let mut config = RunConfig {
            mode: Mode::Fenced,
            duration,
            workers,
            seed: seed_from_clock(),
            every_kind_at_least_once: false,
            between_faults: (Duration::from_millis(1500), Duration::from_millis(3000)),
            pauses: (Duration::ZERO, Duration::ZERO),
            outages: (Duration::ZERO, Duration::ZERO),
            timing,
            worker_command,
            verbose: false,
        };
        config.set_lease(lease);
        config
    }

    /// Sets the lease, and the pauses and outages that follow from it.
    pub fn set_lease(&mut self, lease: Duration) {
        self.timing.lease = lease;
        self.pauses = (lease * 6 / 5, lease * 3);
        self.outages = (Duration::ZERO, lease * 5 / 2);
    }
}

/// A seed that differs from run to run.
pub fn seed_from_clock() -> u64 {
    u64::try_from(super::clock::now()).unwrap_or(0) % 1_000_000_007
}
