//! Lock benchmark: the library against the raw floor and rslock 0.10, in one run.
//!
//! `cargo bench --bench locks` (set `QUICK=1` for a short run, `WORKLOADS=W2,W3` to run W1
//! and only those, `W4_LOCKS=100000` for one W4 size). Starts its own
//! redis-server on a free loopback port, pinned to CPU 1 with the benchmark on CPU 0 when
//! `taskset` is available, and prints one JSON line per workload and contender and a table
//! of ratios. Workloads are those of the project's BENCHMARKS.md, run in this order:
//!
//! - W1: one task, lock + unlock on one key: the raw hash-script floor, the raw SET NX
//!   floor, rslock 0.10, `RLock` (watchdog and 30 s lease) and `FairLock`; with client and
//!   server on CPUs of their own, then on one CPU.
//! - W2: 32 tasks of one client, one key each, lock + unlock for 5 s: the two raw floors,
//!   rslock 0.10 and `RLock`, with pairs/s, latency and redis-server CPU per pair.
//! - W3: 8 tasks contending for one key (lock, hold 1 ms, unlock): `RLock`, `FairLock` and
//!   rslock 0.10, with each one's acquisitions/s as a ratio to rslock's.
//! - W5: W1 in turns for the raw hash-script floor on one master and on five (each step
//!   done at a majority), `RLock` and a `RedLock` over five local masters; W3 with that
//!   `RedLock`.
//! - W4: one client holding many watchdog locks, each size with 100 keys per renewal call
//!   and the largest with 500 too, beside the same renewals sent raw.

use testkit as support;

use std::process::Command;

use futures_util::StreamExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::Script;
use std::future::Future;
use std::pin::Pin;

use redis_rlock::{Client, DistributedLock, GroupGuard, LockGuard, RedLock};
use rslock::LockManager;
use support::RedisServer;

struct Figures {
    name: &'static str,
    micros: Vec<f64>,
    /// CPU time this thread (the whole client: a current-thread runtime) spent on the
    /// timed pairs.
    cpu_micros: f64,
}

impl Figures {
    fn percentile(&self, p: f64) -> f64 {
        let mut sorted = self.micros.clone();
        sorted.sort_by(|a, b| a.total_cmp(b));
        sorted[((sorted.len() - 1) as f64 * p).round() as usize]
    }

    fn ops_per_sec(&self) -> f64 {
        self.micros.len() as f64 / (self.micros.iter().sum::<f64>() / 1e6)
    }

    fn cpu_per_pair(&self) -> f64 {
        self.cpu_micros / self.micros.len() as f64
    }
}

/// CPU time of the calling thread, in µs: unlike wall time, it does not swing with what
/// else the machine runs.
fn thread_cpu_micros() -> f64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec to write to; the clock id is a constant.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    now.tv_sec as f64 * 1e6 + now.tv_nsec as f64 / 1e3
}

/// One lock + unlock of a contender in the interleaved W1.
type Pair<'a> = Box<dyn FnMut() -> Pin<Box<dyn Future<Output = ()> + 'a>> + 'a>;

/// Pairs of consecutive W1 contenders run in blocks of this many, in turn.
const BLOCK: usize = 100;

/// W1 with the contenders taking turns, a block of pairs each, rather than one after the
/// other: what else the machine does at any moment then weighs on all of them alike, and
/// the ratios between them hold even when the absolute figures drift.
async fn interleaved(
    mut contenders: Vec<(&'static str, Pair<'_>)>,
    warmup: usize,
    pairs: usize,
) -> Vec<Figures> {
    for (_, pair) in &mut contenders {
        for _ in 0..warmup {
            pair().await;
        }
    }
    let mut figures: Vec<Figures> = contenders
        .iter()
        .map(|(name, _)| Figures {
            name,
            micros: Vec::with_capacity(pairs),
            cpu_micros: 0.0,
        })
        .collect();
    for _ in 0..pairs.div_ceil(BLOCK) {
        for ((_, pair), figures) in contenders.iter_mut().zip(&mut figures) {
            let cpu_before = thread_cpu_micros();
            for _ in 0..BLOCK {
                let started = Instant::now();
                pair().await;
                figures.micros.push(started.elapsed().as_secs_f64() * 1e6);
            }
            figures.cpu_micros += thread_cpu_micros() - cpu_before;
        }
    }
    figures
}

fn pin(pid: u32, cpu: &str) -> bool {
    Command::new("taskset")
        .args(["-cp", cpu, &pid.to_string()])
        .output()
        .is_ok_and(|out| out.status.success())
}

/// `lua/acquire.lua` as the library sends it: after the helpers it shares.
const ACQUIRE_SOURCE: &str = concat!(
    include_str!("../src/protocol/scripts/lock_common.lua"),
    include_str!("../src/protocol/scripts/acquire.lua")
);

/// The names the raw hash-script floor uses for one lock, in the library's layout.
struct HashNames {
    key: String,
    channel: String,
    owner: String,
}

impl HashNames {
    fn new(key: &str, task: usize) -> HashNames {
        HashNames {
            key: key.to_string(),
            channel: format!("redisson_lock__channel:{{{key}}}"),
            owner: format!("00000000-0000-4000-8000-000000000000:{task}"),
        }
    }
}

/// The floor: the library's own scripts, called directly on one multiplexed connection,
/// two round trips per pair. Each unlock has its own latch (left to expire), as the
/// library's do; `request` must differ from one call to the next on the same key.
async fn raw_hash_pair(
    conn: &mut MultiplexedConnection,
    acquire: &Script,
    unlock: &Script,
    names: &HashNames,
    request: u64,
) {
    let got: Vec<i64> = acquire
        .key(&names.key)
        .arg(30_000)
        .arg(&names.owner)
        .invoke_async(conn)
        .await
        .unwrap();
    assert_eq!(got, [-3], "acquired");
    let freed: Vec<i64> = unlock
        .key(&names.key)
        .key(format!(
            "redisson_unlock_latch:{{{}}}:{request:032x}",
            names.key
        ))
        .arg("0")
        .arg(5_000)
        .arg(&names.channel)
        .arg(30_000)
        .arg(&names.owner)
        .arg("0")
        .invoke_async(conn)
        .await
        .unwrap();
    assert_eq!(freed, [1], "freed");
}

/// The floor of W5: the same two scripts as [`raw_hash_pair`] sent to every master at once,
/// each step done when a majority has answered, as a RedLock's are; the other answers are
/// left to arrive on their own. Nothing else: no validity reckoning, no rollback, no
/// watchdog.
async fn raw_quorum_pair(
    conns: &[MultiplexedConnection],
    acquire: &Script,
    unlock: &Script,
    names: &HashNames,
    request: u64,
) {
    let quorum = conns.len() / 2 + 1;
    let acquired = first_answers(conns, quorum, |mut conn| async move {
        acquire
            .key(&names.key)
            .arg(30_000)
            .arg(&names.owner)
            .invoke_async(&mut conn)
            .await
            .unwrap()
    })
    .await;
    assert!(acquired.iter().all(|got| got == &[-3]), "acquired");
    let latch = &format!("redisson_unlock_latch:{{{}}}:{request:032x}", names.key);
    let freed = first_answers(conns, quorum, |mut conn| async move {
        unlock
            .key(&names.key)
            .key(&names.channel)
            .key(latch)
            .arg("0")
            .arg(5_000)
            .arg(30_000)
            .arg(&names.owner)
            .arg("0")
            .invoke_async(&mut conn)
            .await
            .unwrap()
    })
    .await;
    assert!(freed.iter().all(|got| got == &[1]), "freed");
}

/// Runs `call` on every connection at once; returns the first `quorum` answers, leaving
/// the others to arrive on their own.
async fn first_answers<'a, F, Fut>(
    conns: &'a [MultiplexedConnection],
    quorum: usize,
    call: F,
) -> Vec<Vec<i64>>
where
    F: Fn(MultiplexedConnection) -> Fut,
    Fut: Future<Output = Vec<i64>> + 'a,
{
    conns
        .iter()
        .map(|conn| call(conn.clone()))
        .collect::<futures_util::stream::FuturesUnordered<_>>()
        .take(quorum)
        .collect()
        .await
}

/// The second floor: SET NX PX and a compare-and-delete script.
async fn raw_set_nx_pair(conn: &mut MultiplexedConnection, delete: &Script, key: &str) {
    let ok: Option<String> = redis::cmd("SET")
        .arg(key)
        .arg("token")
        .arg("NX")
        .arg("PX")
        .arg(30_000)
        .query_async(conn)
        .await
        .unwrap();
    assert!(ok.is_some());
    let deleted: i64 = delete
        .key(key)
        .arg("token")
        .invoke_async(conn)
        .await
        .unwrap();
    assert_eq!(deleted, 1);
}

/// CPU seconds (system + user) redis-server has used so far, from `INFO cpu`, whose
/// figures have a fractional part (`support::info_field` reads whole numbers).
fn server_cpu_seconds(server: &RedisServer) -> f64 {
    let info = server.cli(&["INFO", "cpu"]);
    let field = |name: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|value| value.trim().parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no {name} in INFO cpu: {info}"))
    };
    field("used_cpu_sys") + field("used_cpu_user")
}

/// Commands Redis has run, those that scripts ran included (`INFO commandstats`), leaving
/// out the benchmark's own INFO and FLUSHALL calls.
fn server_commands(server: &RedisServer) -> u64 {
    server
        .cli(&["INFO", "commandstats"])
        .lines()
        .filter(|line| !line.starts_with("cmdstat_info") && !line.starts_with("cmdstat_flushall"))
        .filter_map(|line| {
            line.split_once("calls=")?
                .1
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// The value at fraction `p` of `sorted`.
fn at(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// What W2 measured for one contender.
struct Throughput {
    name: &'static str,
    pairs: usize,
    run_s: f64,
    pairs_per_s: f64,
    p50: f64,
    p99: f64,
    server_cpu_us_per_pair: f64,
    /// The benchmark's one runtime thread: every task and the connections' drivers.
    client_cpu_us_per_pair: f64,
    /// Commands Redis ran per pair, inside scripts or not.
    commands_per_pair: f64,
}

/// W2: 32 tasks of one client, one key each, each looping lock + unlock on its key for
/// `run`; `task(i)` makes the pair of task `i`. The keyspace is emptied first, so that keys
/// an earlier contender left to expire (unlock latches) are not expired on this one's
/// server CPU time; 20 untimed rounds of one pair per task then open connections and load
/// scripts.
async fn w2<T, P, Fut>(
    name: &'static str,
    server: &RedisServer,
    run: Duration,
    task: T,
) -> Throughput
where
    T: Fn(usize) -> P,
    P: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    const TASKS: usize = 32;
    const WARMUP_ROUNDS: usize = 20;
    server.cli(&["FLUSHALL"]);
    let mut pairs: Vec<P> = (0..TASKS).map(task).collect();
    for _ in 0..WARMUP_ROUNDS {
        futures_util::future::join_all(pairs.iter_mut().map(|pair| pair())).await;
    }
    let commands_before = server_commands(server);
    let cpu_before = server_cpu_seconds(server);
    let client_cpu_before = thread_cpu_micros();
    let started = Instant::now();
    let deadline = started + run;
    let tasks: Vec<_> = pairs
        .into_iter()
        .map(|mut pair| {
            tokio::spawn(async move {
                let mut micros = Vec::new();
                while Instant::now() < deadline {
                    let began = Instant::now();
                    pair().await;
                    micros.push(began.elapsed().as_secs_f64() * 1e6);
                }
                micros
            })
        })
        .collect();
    let mut micros = Vec::new();
    for task in tasks {
        micros.extend(task.await.unwrap());
    }
    let run_s = started.elapsed().as_secs_f64();
    let server_cpu = server_cpu_seconds(server) - cpu_before;
    let client_cpu = thread_cpu_micros() - client_cpu_before;
    let commands = server_commands(server) - commands_before;
    micros.sort_by(|a, b| a.total_cmp(b));
    Throughput {
        name,
        pairs: micros.len(),
        run_s,
        pairs_per_s: micros.len() as f64 / run_s,
        p50: at(&micros, 0.5),
        p99: at(&micros, 0.99),
        server_cpu_us_per_pair: server_cpu * 1e6 / micros.len() as f64,
        client_cpu_us_per_pair: client_cpu / micros.len() as f64,
        commands_per_pair: commands as f64 / micros.len() as f64,
    }
}

/// Clock ticks of CPU time (user + system) this process used, from /proc.
fn process_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name, which is in parentheses and may contain spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name; 100 Hz.
    (ticks(11) + ticks(12)) / 100.0
}

fn rss_bytes() -> i64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// A held lock of any kind, released after the hold.
enum Held {
    One(LockGuard),
    Group(GroupGuard),
    Rslock(rslock::Lock),
}

impl Held {
    async fn unlock(self) {
        match self {
            Held::One(guard) => guard.unlock().await.unwrap(),
            Held::Group(guard) => guard.unlock().await.unwrap(),
            // Through the manager that took it.
            Held::Rslock(lock) => lock.lock_manager.unlock(&lock).await,
        }
    }
}

/// Something that waits for its lock and returns it held.
trait Contender: Clone + Send + Sync + 'static {
    fn take(&self) -> Pin<Box<dyn Future<Output = Held> + Send + '_>>;
}

/// Any single-node lock kind.
#[derive(Clone)]
struct Single<L>(L);

impl<L: DistributedLock<Guard = LockGuard>> Contender for Single<L> {
    fn take(&self) -> Pin<Box<dyn Future<Output = Held> + Send + '_>> {
        Box::pin(async move { Held::One(self.0.lock().await.unwrap()) })
    }
}

impl Contender for RedLock {
    fn take(&self) -> Pin<Box<dyn Future<Output = Held> + Send + '_>> {
        Box::pin(async move { Held::Group(self.lock().await.unwrap()) })
    }
}

/// rslock 0.10 on one resource: `acquire` (30 s ttl) loops until it has the lock.
#[derive(Clone)]
struct Rslock {
    manager: LockManager,
    resource: &'static [u8],
}

impl Contender for Rslock {
    fn take(&self) -> Pin<Box<dyn Future<Output = Held> + Send + '_>> {
        Box::pin(async move {
            let guard = self
                .manager
                .acquire(self.resource, Duration::from_secs(30))
                .await
                .unwrap();
            Held::Rslock(guard.lock)
        })
    }
}

/// What W3 measured of one contender, over one or more runs.
#[derive(Default)]
struct Contention {
    /// Every wait, in ms.
    waits: Vec<f64>,
    /// Acquisitions of each task, summed over the runs.
    per_task: Vec<usize>,
    elapsed_s: f64,
}

/// W3: 8 tasks of one client contend for one lock for `run`: lock (defaults), hold 1 ms (a
/// thread sleep on the blocking pool: tokio's timer rounds 1 ms up to ~2 ms), unlock.
/// Adds what it measured to `figures`.
async fn w3(lock: impl Contender, run: Duration, figures: &mut Contention) {
    const TASKS: usize = 8;
    let started = Instant::now();
    let deadline = started + run;
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let lock = lock.clone();
            tokio::spawn(async move {
                let mut waits = Vec::new();
                while Instant::now() < deadline {
                    let asked = Instant::now();
                    let guard = lock.take().await;
                    waits.push(asked.elapsed().as_secs_f64() * 1e3);
                    tokio::task::spawn_blocking(|| std::thread::sleep(Duration::from_millis(1)))
                        .await
                        .unwrap();
                    guard.unlock().await;
                }
                waits
            })
        })
        .collect();
    figures.per_task.resize(TASKS, 0);
    for (i, task) in tasks.into_iter().enumerate() {
        let task_waits = task.await.unwrap();
        figures.per_task[i] += task_waits.len();
        figures.waits.extend(task_waits);
    }
    figures.elapsed_s += started.elapsed().as_secs_f64();
}

/// Prints W3's JSON line for `contender`; returns its acquisitions per second and a table
/// row.
fn w3_report(contender: &str, figures: &mut Contention) -> (f64, String) {
    let waits = &mut figures.waits;
    waits.sort_by(|a, b| a.total_cmp(b));
    let (p50, p99, max) = (at(waits, 0.5), at(waits, 0.99), waits[waits.len() - 1]);
    let per_sec = waits.len() as f64 / figures.elapsed_s;
    let (fewest, most) = (
        *figures.per_task.iter().min().unwrap(),
        *figures.per_task.iter().max().unwrap(),
    );
    println!(
        "{{\"workload\":\"W3\",\"contender\":\"{contender}\",\"tasks\":{},\"run_s\":{:.1},\"acquisitions_per_s\":{per_sec:.0},\"wait_p50_ms\":{p50:.2},\"wait_p99_ms\":{p99:.2},\"wait_max_ms\":{max:.2},\"per_task_min\":{fewest},\"per_task_max\":{most}}}",
        figures.per_task.len(),
        figures.elapsed_s,
    );
    let row = format!(
        "{contender:<10} {per_sec:>8.0} {p50:>9.2} {p99:>9.2} {max:>9.2} {:>13}",
        format!("{fewest}–{most}")
    );
    (per_sec, row)
}

/// The floor of W4: `lua/renew.lua` called directly over `locks` lock hashes, in batches of
/// `batch` with 4 in flight (as the watchdog sends them), a round every second for `hold`.
/// Returns the client CPU it took, in % of a core.
async fn w4_raw_floor(server: &RedisServer, locks: usize, hold: Duration, batch: usize) -> f64 {
    let conn = server.raw().await;
    let owner = "00000000-0000-4000-8000-000000000000:1";
    let keys: Vec<String> = (0..locks).map(|i| format!("w4:raw:{locks}:{i}")).collect();
    for chunk in keys.chunks(512) {
        let mut pipe = redis::pipe();
        for key in chunk {
            pipe.hset(key, owner, 1).ignore();
            pipe.pexpire(key, 3_000).ignore();
        }
        let () = pipe.query_async(&mut conn.clone()).await.unwrap();
    }
    let renew = Script::new(include_str!("../src/protocol/scripts/renew.lua"));
    let cpu_before = process_cpu_seconds();
    let started = Instant::now();
    while started.elapsed() < hold {
        let round = Instant::now();
        let renewed: Vec<Vec<i64>> = futures_util::stream::iter(keys.chunks(batch))
            .map(|batch| {
                let mut call = redis::cmd("EVALSHA");
                call.arg(renew.get_hash()).arg(batch.len());
                for key in batch {
                    call.arg(key);
                }
                call.arg(3_000);
                for _ in batch {
                    call.arg(owner);
                }
                let mut conn = conn.clone();
                async move { call.query_async(&mut conn).await.unwrap() }
            })
            .buffer_unordered(4)
            .collect()
            .await;
        assert!(
            renewed.iter().flatten().all(|&r| r == 1),
            "a raw lock expired"
        );
        tokio::time::sleep(Duration::from_secs(1).saturating_sub(round.elapsed())).await;
    }
    let cpu = process_cpu_seconds() - cpu_before;
    server.cli(&["FLUSHALL"]);
    cpu / hold.as_secs_f64() * 100.0
}

/// W4: one client holds `locks` watchdog locks (3 s watchdog, `batch` keys per renewal
/// call) for `hold`. The RSS per lock means something only in the first run of a size: a
/// later one reuses the memory the first gave back, and prints none.
async fn w4(
    server: &RedisServer,
    locks: usize,
    hold: Duration,
    batch: usize,
    first_of_size: bool,
) -> String {
    let client = Client::builder(server.url())
        .watchdog_timeout(Duration::from_secs(3))
        .watchdog_batch_size(batch)
        .build()
        .await
        .unwrap();
    let (rss_before, redis_before) = (
        rss_bytes(),
        support::info_field(server, "memory", "used_memory", ""),
    );
    let mut guards = Vec::with_capacity(locks);
    let names: Vec<usize> = (0..locks).collect();
    for chunk in names.chunks(512) {
        let taking = chunk.iter().map(|i| {
            let lock = client.lock(format!("w4:{locks}:{i}"));
            async move { lock.lock().await.unwrap() }
        });
        guards.extend(futures_util::future::join_all(taking).await);
    }
    let (rss_after, redis_after) = (
        rss_bytes(),
        support::info_field(server, "memory", "used_memory", ""),
    );
    let calls_before = support::info_field(server, "commandstats", "cmdstat_evalsha", "calls");
    let usec_before = support::info_field(server, "commandstats", "cmdstat_evalsha", "usec");
    let cpu_before = process_cpu_seconds();
    tokio::time::sleep(hold).await;
    let cpu = process_cpu_seconds() - cpu_before;
    let renewal_calls =
        support::info_field(server, "commandstats", "cmdstat_evalsha", "calls") - calls_before;
    // How long each renewal call keeps Redis from serving anyone else.
    let redis_us_per_call = (support::info_field(server, "commandstats", "cmdstat_evalsha", "usec")
        - usec_before) as f64
        / renewal_calls.max(1) as f64;
    let lost = guards.iter().filter(|g| g.is_lost()).count();
    let ticks = hold.as_secs_f64() / 1.0; // a renewal round every watchdog/3 = 1 s
    let per_100_per_tick = renewal_calls as f64 / ticks / (locks as f64 / 100.0);
    let cpu_percent = cpu / hold.as_secs_f64() * 100.0;
    let rss_per_lock = first_of_size.then(|| (rss_after - rss_before) as f64 / locks as f64);
    let (rss_json, rss_cell) = match rss_per_lock {
        Some(bytes) => (format!("{bytes:.0}"), format!("{bytes:.0}")),
        None => ("null".to_string(), "—".to_string()),
    };
    let redis_per_lock = (redis_after - redis_before) as f64 / locks as f64;
    // Released in chunks, as they were taken: 100,000 unlocks at once on this one thread
    // would starve the watchdog past the lease. A lock lost meanwhile is counted.
    let mut lost_at_release = 0;
    let mut guards = guards.into_iter().peekable();
    while guards.peek().is_some() {
        let releasing = guards.by_ref().take(512).map(|g| g.unlock());
        for released in futures_util::future::join_all(releasing).await {
            match released {
                Ok(()) => {}
                Err(e) if e.is_lock_lost() => lost_at_release += 1,
                Err(e) => panic!("release failed: {e}"),
            }
        }
    }
    println!(
        "{{\"workload\":\"W4\",\"locks\":{locks},\"keys_per_call\":{batch},\"hold_s\":{},\"lost\":{lost},\"lost_at_release\":{lost_at_release},\"renewal_calls_per_100_locks_per_tick\":{per_100_per_tick:.2},\"client_cpu_percent\":{cpu_percent:.1},\"redis_us_per_renewal_call\":{redis_us_per_call:.0},\"client_rss_bytes_per_lock\":{rss_json},\"redis_bytes_per_lock\":{redis_per_lock:.0}}}",
        hold.as_secs()
    );
    format!(
        "{locks:>8} {batch:>10} {lost:>6} {per_100_per_tick:>14.2} {redis_us_per_call:>12.0} {cpu_percent:>9.1} {rss_cell:>11} {redis_per_lock:>12.0}"
    )
}

fn main() {
    let quick = std::env::var_os("QUICK").is_some();
    // `WORKLOADS=W2,W4` runs W1 and those only (W1 is the floor every ratio needs).
    let wanted = |workload: &str| {
        std::env::var("WORKLOADS")
            .map_or(true, |list| list.split(',').any(|w| w.trim() == workload))
    };
    let (warmup, pairs) = if quick { (200, 2_000) } else { (500, 10_000) };
    let server = RedisServer::start();
    let pinned = pin(server.pid(), "1") && pin(std::process::id(), "0");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // W1 in both placements: client and server on CPUs of their own (a cross-CPU wake-up
    // in every round trip), then both on CPU 0 (each waits for the other's turn, so the
    // client's own work weighs more).
    let placements = [
        ("cross_cpu", "server on CPU 1, client on CPU 0", "1"),
        ("same_cpu", "client and server both on CPU 0", "0"),
    ];
    for (placement, described, server_cpu) in placements {
        let pinned = pinned && pin(server.pid(), server_cpu);
        let results = runtime.block_on(async {
        let conn = server.raw().await;
        let acquire = Script::new(ACQUIRE_SOURCE);
        let unlock = Script::new(include_str!("../src/protocol/scripts/unlock.lua"));
        let delete = Script::new(
            "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
        );
        let client = Client::connect(server.url()).await.unwrap();
        let lock = client.lock("w1:lib");
        let fair = client.fair_lock("w1:fair");
        let manager = LockManager::new(vec![server.url()]);
        let names = HashNames::new("w1:raw", 1);
        let request = std::cell::Cell::new(0u64);
        let (conn, acquire, unlock, delete, names) = (&conn, &acquire, &unlock, &delete, &names);
        let (manager, lock, fair, request) = (&manager, &lock, &fair, &request);
        // One after the other in each block, so that the processes never compete for the
        // same CPU.
        let contenders: Vec<(&'static str, Pair<'_>)> = vec![
            (
                "raw hash-script floor",
                Box::new(move || {
                    request.set(request.get() + 1);
                    let (mut conn, request) = (conn.clone(), request.get());
                    Box::pin(async move {
                        raw_hash_pair(&mut conn, acquire, unlock, names, request).await
                    })
                }),
            ),
            (
                "raw SET NX floor",
                Box::new(move || {
                    let mut conn = conn.clone();
                    Box::pin(async move { raw_set_nx_pair(&mut conn, delete, "w1:setnx").await })
                }),
            ),
            (
                "rslock 0.10",
                Box::new(move || {
                    Box::pin(async move {
                        let lock = manager
                            .lock(b"w1:rslock", Duration::from_secs(30))
                            .await
                            .expect("rslock takes an uncontended key");
                        manager.unlock(&lock).await;
                    })
                }),
            ),
            (
                "RLock lock() (watchdog)",
                Box::new(move || {
                    Box::pin(async move { lock.lock().await.unwrap().unlock().await.unwrap() })
                }),
            ),
            (
                "RLock lock_with_lease(30 s)",
                Box::new(move || {
                    Box::pin(async move {
                        lock.lock_with_lease(Duration::from_secs(30))
                            .await
                            .unwrap()
                            .unlock()
                            .await
                            .unwrap()
                    })
                }),
            ),
            (
                "FairLock lock() (watchdog)",
                Box::new(move || {
                    Box::pin(async move { fair.lock().await.unwrap().unlock().await.unwrap() })
                }),
            ),
        ];
        let results = interleaved(contenders, warmup, pairs).await;
        results
    });

        let floor = results[0].percentile(0.5);
        for figures in &results {
            println!(
            "{{\"workload\":\"W1\",\"placement\":\"{placement}\",\"contender\":\"{}\",\"pairs\":{},\"p50_us\":{:.1},\"p99_us\":{:.1},\"ops_per_s\":{:.0},\"ratio_p50_to_floor\":{:.3},\"client_cpu_us_per_pair\":{:.1},\"pinned\":{}}}",
            figures.name,
            figures.micros.len(),
            figures.percentile(0.5),
            figures.percentile(0.99),
            figures.ops_per_sec(),
            figures.percentile(0.5) / floor,
            figures.cpu_per_pair(),
            pinned,
        );
        }
        println!();
        println!("W1: 1 task, lock + unlock on one key ({pairs} pairs each after {warmup} warm-up, in turns of {BLOCK}; {described}; pinned: {pinned})");
        println!(
            "{:<30} {:>9} {:>9} {:>10} {:>8} {:>14}",
            "contender", "p50 µs", "p99 µs", "pairs/s", "×floor", "client CPU µs"
        );
        for figures in &results {
            println!(
                "{:<30} {:>9.1} {:>9.1} {:>10.0} {:>8.2} {:>14.1}",
                figures.name,
                figures.percentile(0.5),
                figures.percentile(0.99),
                figures.ops_per_sec(),
                figures.percentile(0.5) / floor,
                figures.cpu_per_pair(),
            );
        }
    }
    let pinned = pinned && pin(server.pid(), "1");

    let contention = if quick {
        Duration::from_secs(2)
    } else {
        Duration::from_secs(5)
    };

    if wanted("W2") {
        // W2: 32 tasks of one client, one key each; the raw floors share one connection and
        // rslock's tasks one LockManager.
        let w2_results = runtime.block_on(async {
        let conn = server.raw().await;
        let acquire = Arc::new(Script::new(ACQUIRE_SOURCE));
        let unlock = Arc::new(Script::new(include_str!("../src/protocol/scripts/unlock.lua")));
        let delete = Arc::new(Script::new(
            "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
        ));
        let manager = Arc::new(LockManager::new(vec![server.url()]));
        let client = Client::connect(server.url()).await.unwrap();
        let mut results = vec![
            w2("raw hash-script floor", &server, contention, |i| {
                let (conn, acquire, unlock) = (conn.clone(), acquire.clone(), unlock.clone());
                let names = Arc::new(HashNames::new(&format!("w2:raw:{i}"), i));
                let mut request = 0u64;
                move || {
                    let mut conn = conn.clone();
                    let (acquire, unlock, names) = (acquire.clone(), unlock.clone(), names.clone());
                    request += 1;
                    let request = request;
                    async move { raw_hash_pair(&mut conn, &acquire, &unlock, &names, request).await }
                }
            })
            .await,
        ];
        results.push(
            w2("raw SET NX floor", &server, contention, |i| {
                let (conn, delete) = (conn.clone(), delete.clone());
                let key: Arc<str> = format!("w2:setnx:{i}").into();
                move || {
                    let mut conn = conn.clone();
                    let (delete, key) = (delete.clone(), key.clone());
                    async move { raw_set_nx_pair(&mut conn, &delete, &key).await }
                }
            })
            .await,
        );
        results.push(
            w2("rslock 0.10", &server, contention, |i| {
                let manager = manager.clone();
                let resource: Arc<[u8]> = format!("w2:rslock:{i}").into_bytes().into();
                move || {
                    let (manager, resource) = (manager.clone(), resource.clone());
                    async move {
                        let lock = manager
                            .lock(&resource[..], Duration::from_secs(30))
                            .await
                            .expect("rslock takes an uncontended key");
                        manager.unlock(&lock).await;
                    }
                }
            })
            .await,
        );
        results.push(
            w2("RLock lock() (watchdog)", &server, contention, |i| {
                let lock = client.lock(format!("w2:rlock:{i}"));
                move || {
                    let lock = lock.clone();
                    async move { lock.lock().await.unwrap().unlock().await.unwrap() }
                }
            })
            .await,
        );
        // W3 starts on an empty keyspace, with no latches left to expire meanwhile.
        server.cli(&["FLUSHALL"]);
        results
    });
        let by_name = |name: &str| {
            w2_results
                .iter()
                .find(|t| t.name == name)
                .map(|t| t.pairs_per_s)
                .unwrap()
        };
        let (w2_rslock, w2_floor) = (by_name("rslock 0.10"), by_name("raw hash-script floor"));
        for t in &w2_results {
            println!(
            "{{\"workload\":\"W2\",\"contender\":\"{}\",\"tasks\":32,\"run_s\":{:.1},\"pairs\":{},\"pairs_per_s\":{:.0},\"p50_us\":{:.1},\"p99_us\":{:.1},\"server_cpu_us_per_pair\":{:.2},\"client_cpu_us_per_pair\":{:.2},\"redis_commands_per_pair\":{:.2},\"ratio_to_rslock\":{:.3},\"ratio_to_raw_hash_floor\":{:.3},\"pinned\":{pinned}}}",
            t.name,
            t.run_s,
            t.pairs,
            t.pairs_per_s,
            t.p50,
            t.p99,
            t.server_cpu_us_per_pair,
            t.client_cpu_us_per_pair,
            t.commands_per_pair,
            t.pairs_per_s / w2_rslock,
            t.pairs_per_s / w2_floor,
        );
        }
        println!();
        println!(
        "W2: 32 tasks of one client, one key each, lock + unlock for {contention:?} (server pinned: {pinned})"
    );
        println!(
            "{:<30} {:>10} {:>9} {:>9} {:>12} {:>12} {:>10} {:>8} {:>8}",
            "contender",
            "pairs/s",
            "p50 µs",
            "p99 µs",
            "srv µs/pair",
            "cli µs/pair",
            "cmds/pair",
            "×rslock",
            "×floor"
        );
        for t in &w2_results {
            println!(
                "{:<30} {:>10.0} {:>9.1} {:>9.1} {:>12.2} {:>12.2} {:>10.2} {:>8.2} {:>8.2}",
                t.name,
                t.pairs_per_s,
                t.p50,
                t.p99,
                t.server_cpu_us_per_pair,
                t.client_cpu_us_per_pair,
                t.commands_per_pair,
                t.pairs_per_s / w2_rslock,
                t.pairs_per_s / w2_floor,
            );
        }
    }

    if wanted("W3") {
        let w3_rows = runtime.block_on(async {
            let client = Client::connect(server.url()).await.unwrap();
            let rslock = Rslock {
                manager: LockManager::new(vec![server.url()]),
                resource: b"w3:rslock",
            };
            // The contenders take turns, a slice of the run each, so that the machine's
            // background load weighs on all of them alike.
            let turns: u32 = if quick { 2 } else { 5 };
            let slice = contention / turns;
            let mut figures: [Contention; 3] = Default::default();
            for _ in 0..turns {
                w3(Single(client.lock("w3:rlock")), slice, &mut figures[0]).await;
                w3(Single(client.fair_lock("w3:fair")), slice, &mut figures[1]).await;
                w3(rslock.clone(), slice, &mut figures[2]).await;
            }
            ["RLock", "FairLock", "rslock"]
                .iter()
                .zip(&mut figures)
                .map(|(name, figures)| w3_report(name, figures))
                .collect::<Vec<_>>()
        });
        let w3_rslock = w3_rows[2].0;
        println!();
        println!(
            "W3: 8 tasks of one client on one key: lock, hold 1 ms, unlock, for {contention:?} (in turns)"
        );
        println!(
            "{:<10} {:>8} {:>9} {:>9} {:>9} {:>13} {:>8}",
            "contender", "acq/s", "wait p50", "wait p99", "wait max", "per task", "×rslock"
        );
        for (per_sec, row) in w3_rows {
            println!("{row} {:>8.2}", per_sec / w3_rslock);
        }
    }

    if wanted("W5") {
        // W5: a RedLock over five masters, this server and four more, all pinned to CPU 1.
        let others: Vec<RedisServer> = (0..4).map(|_| RedisServer::start()).collect();
        let pinned_all = pinned && others.iter().all(|other| pin(other.pid(), "1"));
        let (w5_w1, w5_w3) = runtime.block_on(async {
            let mut clients = vec![Client::connect(server.url()).await.unwrap()];
            let mut conns = vec![server.raw().await];
            for other in &others {
                clients.push(Client::connect(other.url()).await.unwrap());
                conns.push(other.raw().await);
            }
            let redlock = RedLock::new(clients.iter().map(|c| c.lock("w5:w1")).collect());
            let lock = clients[0].lock("w5:single");
            let (redlock, lock) = (&redlock, &lock);
            let acquire = Script::new(ACQUIRE_SOURCE);
            let unlock = Script::new(include_str!("../src/protocol/scripts/unlock.lua"));
            let names = HashNames::new("w5:raw", 0);
            let request = std::cell::Cell::new(0u64);
            let (conns, acquire, unlock, names, request) =
                (&conns, &acquire, &unlock, &names, &request);
            // In turns, for ratios that hold on a noisy machine: the raw floors on one
            // master and on five show what the fan-out costs on this machine whatever the
            // client, the library's pair of contenders what it costs through the library.
            let contenders: Vec<(&'static str, Pair<'_>)> = vec![
                (
                    "raw hash floor (1 node)",
                    Box::new(move || {
                        request.set(request.get() + 1);
                        let (mut conn, request) = (conns[0].clone(), request.get());
                        Box::pin(async move {
                            raw_hash_pair(&mut conn, acquire, unlock, names, request).await
                        })
                    }),
                ),
                (
                    "raw hash floor (5 masters, majority)",
                    Box::new(move || {
                        request.set(request.get() + 1);
                        let request = request.get();
                        Box::pin(async move {
                            raw_quorum_pair(conns, acquire, unlock, names, request).await
                        })
                    }),
                ),
                (
                    "RLock lock() (1 node)",
                    Box::new(move || {
                        Box::pin(async move { lock.lock().await.unwrap().unlock().await.unwrap() })
                    }),
                ),
                (
                    "RedLock lock() (5 masters)",
                    Box::new(move || {
                        Box::pin(
                            async move { redlock.lock().await.unwrap().unlock().await.unwrap() },
                        )
                    }),
                ),
            ];
            let w1 = interleaved(contenders, warmup, pairs).await;
            let contended = RedLock::new(clients.iter().map(|c| c.lock("w5:w3")).collect());
            let mut figures = Contention::default();
            w3(contended, contention, &mut figures).await;
            (w1, w3_report("RedLock", &mut figures))
        });
        // Each five-master contender beside its own one-node counterpart.
        let w5_rows: Vec<(&Figures, f64)> = w5_w1
            .iter()
            .zip([0, 0, 2, 2])
            .map(|(figures, one_node)| {
                let ratio = figures.percentile(0.5) / w5_w1[one_node].percentile(0.5);
                (figures, ratio)
            })
            .collect();
        for (figures, ratio) in &w5_rows {
            println!(
                "{{\"workload\":\"W5\",\"contender\":\"{}\",\"pairs\":{},\"p50_us\":{:.1},\"p99_us\":{:.1},\"ops_per_s\":{:.0},\"client_cpu_us_per_pair\":{:.1},\"ratio_p50_to_one_node\":{ratio:.3},\"pinned\":{pinned_all}}}",
                figures.name,
                figures.micros.len(),
                figures.percentile(0.5),
                figures.percentile(0.99),
                figures.ops_per_sec(),
                figures.cpu_per_pair(),
            );
        }
        println!();
        println!("W5: RedLock over 5 masters (all servers pinned: {pinned_all}); W1 in turns");
        println!(
            "{:<38} {:>9} {:>9} {:>10} {:>14} {:>13}",
            "contender", "p50 µs", "p99 µs", "pairs/s", "client CPU µs", "×one node p50"
        );
        for (figures, ratio) in &w5_rows {
            println!(
                "{:<38} {:>9.1} {:>9.1} {:>10.0} {:>14.1} {:>13.2}",
                figures.name,
                figures.percentile(0.5),
                figures.percentile(0.99),
                figures.ops_per_sec(),
                figures.cpu_per_pair(),
                ratio,
            );
        }
        println!(
            "W3: {:<10} {:>8} {:>9} {:>9} {:>9} {:>13}",
            "contender", "acq/s", "wait p50", "wait p99", "wait max", "per task"
        );
        println!("    {}", w5_w3.1);
        drop(others);
    }

    if wanted("W4") {
        let (mut sizes, hold) = if quick {
            (vec![1_000, 10_000], Duration::from_secs(6))
        } else {
            (vec![1_000, 10_000, 100_000], Duration::from_secs(15))
        };
        // `W4_LOCKS=100000` measures that many locks only.
        if let Some(only) = std::env::var("W4_LOCKS").ok().and_then(|n| n.parse().ok()) {
            sizes = vec![only];
        }
        // Each size with the default 100 keys per renewal call; the largest also with 500,
        // to show what the number of calls costs the client.
        let mut runs: Vec<(usize, usize)> = sizes.iter().map(|&locks| (locks, 100)).collect();
        runs.push((*sizes.last().expect("a W4 size"), 500));
        let rows: Vec<String> = runs
            .iter()
            .map(|&(locks, batch)| {
                let first_of_size = batch == 100;
                let row = runtime.block_on(w4(&server, locks, hold, batch, first_of_size));
                let floor = runtime.block_on(async {
                    let mut conn = server.raw().await;
                    // The script must be known before the floor's first EVALSHA.
                    let _: String = Script::new(include_str!("../src/protocol/scripts/renew.lua"))
                        .prepare_invoke()
                        .load_async(&mut conn)
                        .await
                        .unwrap();
                    w4_raw_floor(&server, locks, hold, batch).await
                });
                println!(
                    "{{\"workload\":\"W4\",\"contender\":\"raw renew.lua floor\",\"locks\":{locks},\"keys_per_call\":{batch},\"hold_s\":{},\"client_cpu_percent\":{floor:.1}}}",
                    hold.as_secs()
                );
                format!("{row} {floor:>12.1}")
            })
            .collect();
        println!();
        println!("W4: one client holds N watchdog locks (3 s watchdog) for {hold:?}");
        println!(
            "{:>8} {:>10} {:>6} {:>14} {:>12} {:>9} {:>11} {:>12} {:>12}",
            "locks",
            "keys/call",
            "lost",
            "calls/100/tick",
            "Redis µs/call",
            "client %",
            "RSS B/lock",
            "Redis B/lock",
            "raw floor %"
        );
        for row in rows {
            println!("{row}");
        }
    }
}
