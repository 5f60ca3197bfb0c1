//! Lock benchmark: the library against the raw floor, in one run.
//!
//! `cargo bench --bench locks` (set `QUICK=1` for a short run). Starts its own
//! redis-server on a free loopback port, pinned to CPU 1 with the benchmark on CPU 0 when
//! `taskset` is available, and prints one JSON line per workload and a table of ratios to
//! the floor. Workloads are those of the project's BENCHMARKS.md; this program runs W1 (one
//! task, lock + unlock on one key), W3 (8 tasks contending for one key, `RLock` and
//! `FairLock`), W4 (one client holding many watchdog locks) and W5 (W1 and W3 with a
//! `RedLock` over five local masters) so far.

#[path = "../tests/support/mod.rs"]
mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::Script;
use std::future::Future;
use std::pin::Pin;

use redis_rlock::{Client, DistributedLock, GroupGuard, LockGuard, RedLock};
use support::RedisServer;

struct Figures {
    name: &'static str,
    micros: Vec<f64>,
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
}

fn pin(pid: u32, cpu: &str) -> bool {
    Command::new("taskset")
        .args(["-cp", cpu, &pid.to_string()])
        .output()
        .is_ok_and(|out| out.status.success())
}

async fn timed<F, Fut>(name: &'static str, warmup: usize, pairs: usize, mut pair: F) -> Figures
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for _ in 0..warmup {
        pair().await;
    }
    let mut micros = Vec::with_capacity(pairs);
    for _ in 0..pairs {
        let started = Instant::now();
        pair().await;
        micros.push(started.elapsed().as_secs_f64() * 1e6);
    }
    Figures { name, micros }
}

/// The floor: the library's own scripts, called directly on one multiplexed connection,
/// two round trips per pair. Each unlock has its own latch (left to expire), as the
/// library's do.
async fn raw_hash_pair(
    conn: &mut MultiplexedConnection,
    acquire: &Script,
    unlock: &Script,
    request: u64,
) {
    let owner = "00000000-0000-4000-8000-000000000000:1";
    let got: Option<i64> = acquire
        .key("w1:raw")
        .arg(30_000)
        .arg(owner)
        .invoke_async(conn)
        .await
        .unwrap();
    assert!(got.is_none());
    let freed: Option<i64> = unlock
        .key("w1:raw")
        .key("redisson_lock__channel:{w1:raw}")
        .key(format!("redisson_unlock_latch:{{w1:raw}}:{request:032x}"))
        .arg("0")
        .arg(30_000)
        .arg(owner)
        .arg(5_000)
        .invoke_async(conn)
        .await
        .unwrap();
    assert_eq!(freed, Some(1));
}

/// The second floor: SET NX PX and a compare-and-delete script.
async fn raw_set_nx_pair(conn: &mut MultiplexedConnection, delete: &Script) {
    let ok: Option<String> = redis::cmd("SET")
        .arg("w1:setnx")
        .arg("token")
        .arg("NX")
        .arg("PX")
        .arg(30_000)
        .query_async(conn)
        .await
        .unwrap();
    assert!(ok.is_some());
    let deleted: i64 = delete
        .key("w1:setnx")
        .arg("token")
        .invoke_async(conn)
        .await
        .unwrap();
    assert_eq!(deleted, 1);
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
}

impl Held {
    async fn unlock(self) {
        match self {
            Held::One(guard) => guard.unlock().await.unwrap(),
            Held::Group(guard) => guard.unlock().await.unwrap(),
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

impl<L: DistributedLock> Contender for Single<L> {
    fn take(&self) -> Pin<Box<dyn Future<Output = Held> + Send + '_>> {
        Box::pin(async move { Held::One(self.0.lock().await.unwrap()) })
    }
}

impl Contender for RedLock {
    fn take(&self) -> Pin<Box<dyn Future<Output = Held> + Send + '_>> {
        Box::pin(async move { Held::Group(self.lock().await.unwrap()) })
    }
}

/// W3: 8 tasks of one client contend for one lock for `run`: lock (defaults), hold 1 ms (a
/// thread sleep on the blocking pool: tokio's timer rounds 1 ms up to ~2 ms), unlock.
async fn w3(contender: &'static str, lock: impl Contender, run: Duration) -> String {
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
    let mut per_task = Vec::with_capacity(TASKS);
    let mut waits = Vec::new();
    for task in tasks {
        let task_waits = task.await.unwrap();
        per_task.push(task_waits.len());
        waits.extend(task_waits);
    }
    let elapsed = started.elapsed().as_secs_f64();
    waits.sort_by(|a, b| a.total_cmp(b));
    let at = |p: f64| waits[((waits.len() - 1) as f64 * p).round() as usize];
    let (p50, p99, max) = (at(0.5), at(0.99), waits[waits.len() - 1]);
    let per_sec = waits.len() as f64 / elapsed;
    let (fewest, most) = (
        *per_task.iter().min().unwrap(),
        *per_task.iter().max().unwrap(),
    );
    println!(
        "{{\"workload\":\"W3\",\"contender\":\"{contender}\",\"tasks\":{TASKS},\"run_s\":{elapsed:.1},\"acquisitions_per_s\":{per_sec:.0},\"wait_p50_ms\":{p50:.2},\"wait_p99_ms\":{p99:.2},\"wait_max_ms\":{max:.2},\"per_task_min\":{fewest},\"per_task_max\":{most}}}"
    );
    format!(
        "{contender:<10} {per_sec:>8.0} {p50:>9.2} {p99:>9.2} {max:>9.2} {:>13}",
        format!("{fewest}–{most}")
    )
}

/// W4: one client holds `locks` watchdog locks (3 s watchdog) for `hold`.
async fn w4(server: &RedisServer, locks: usize, hold: Duration) -> String {
    let client = Client::builder(server.url())
        .watchdog_timeout(Duration::from_secs(3))
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
    let cpu_before = process_cpu_seconds();
    tokio::time::sleep(hold).await;
    let cpu = process_cpu_seconds() - cpu_before;
    let renewal_calls =
        support::info_field(server, "commandstats", "cmdstat_evalsha", "calls") - calls_before;
    let lost = guards.iter().filter(|g| g.is_lost()).count();
    let ticks = hold.as_secs_f64() / 1.0; // a renewal round every watchdog/3 = 1 s
    let per_100_per_tick = renewal_calls as f64 / ticks / (locks as f64 / 100.0);
    let cpu_percent = cpu / hold.as_secs_f64() * 100.0;
    let rss_per_lock = (rss_after - rss_before) as f64 / locks as f64;
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
        "{{\"workload\":\"W4\",\"locks\":{locks},\"hold_s\":{},\"lost\":{lost},\"lost_at_release\":{lost_at_release},\"renewal_calls_per_100_locks_per_tick\":{per_100_per_tick:.2},\"client_cpu_percent\":{cpu_percent:.1},\"client_rss_bytes_per_lock\":{rss_per_lock:.0},\"redis_bytes_per_lock\":{redis_per_lock:.0}}}",
        hold.as_secs()
    );
    format!(
        "{locks:>8} {lost:>6} {per_100_per_tick:>14.2} {cpu_percent:>9.1} {rss_per_lock:>11.0} {redis_per_lock:>12.0}"
    )
}

fn main() {
    let quick = std::env::var_os("QUICK").is_some();
    let (warmup, pairs) = if quick { (200, 2_000) } else { (500, 10_000) };
    let server = RedisServer::start();
    let pinned = pin(server.pid(), "1") && pin(std::process::id(), "0");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let results = runtime.block_on(async {
        let mut conn = server.raw().await;
        let acquire = Script::new(include_str!("../lua/acquire.lua"));
        let unlock = Script::new(include_str!("../lua/unlock.lua"));
        let delete = Script::new(
            "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
        );
        let client = Client::connect(server.url()).await.unwrap();
        let lock = client.lock("w1:lib");
        let fair = client.fair_lock("w1:fair");
        let mut request = 0u64;
        // Sequential, so that the processes never compete for the same CPU.
        let mut results = vec![
            timed("raw hash-script floor", warmup, pairs, || {
                let mut conn = conn.clone();
                let (acquire, unlock) = (&acquire, &unlock);
                request += 1;
                let request = request;
                async move { raw_hash_pair(&mut conn, acquire, unlock, request).await }
            })
            .await,
        ];
        results.push(
            timed("raw SET NX floor", warmup, pairs, || {
                let mut conn = conn.clone();
                let delete = &delete;
                async move { raw_set_nx_pair(&mut conn, delete).await }
            })
            .await,
        );
        results.push(
            timed("RLock lock() (watchdog)", warmup, pairs, || async {
                lock.lock().await.unwrap().unlock().await.unwrap();
            })
            .await,
        );
        results.push(
            timed("RLock lock_with_lease(30 s)", warmup, pairs, || async {
                lock.lock_with_lease(Duration::from_secs(30))
                    .await
                    .unwrap()
                    .unlock()
                    .await
                    .unwrap();
            })
            .await,
        );
        results.push(
            timed("FairLock lock() (watchdog)", warmup, pairs, || async {
                fair.lock().await.unwrap().unlock().await.unwrap();
            })
            .await,
        );
        let _ = &mut conn;
        results
    });

    let floor = results[0].percentile(0.5);
    for figures in &results {
        println!(
            "{{\"workload\":\"W1\",\"contender\":\"{}\",\"pairs\":{},\"p50_us\":{:.1},\"p99_us\":{:.1},\"ops_per_s\":{:.0},\"ratio_p50_to_floor\":{:.3},\"pinned\":{}}}",
            figures.name,
            figures.micros.len(),
            figures.percentile(0.5),
            figures.percentile(0.99),
            figures.ops_per_sec(),
            figures.percentile(0.5) / floor,
            pinned,
        );
    }
    println!();
    println!("W1: 1 task, lock + unlock on one key ({pairs} pairs after {warmup} warm-up; server pinned: {pinned})");
    println!(
        "{:<30} {:>9} {:>9} {:>10} {:>8}",
        "contender", "p50 µs", "p99 µs", "pairs/s", "×floor"
    );
    for figures in &results {
        println!(
            "{:<30} {:>9.1} {:>9.1} {:>10.0} {:>8.2}",
            figures.name,
            figures.percentile(0.5),
            figures.percentile(0.99),
            figures.ops_per_sec(),
            figures.percentile(0.5) / floor
        );
    }

    let contention = if quick {
        Duration::from_secs(2)
    } else {
        Duration::from_secs(5)
    };
    let w3_rows = runtime.block_on(async {
        let client = Client::connect(server.url()).await.unwrap();
        vec![
            w3("RLock", Single(client.lock("w3:rlock")), contention).await,
            w3("FairLock", Single(client.fair_lock("w3:fair")), contention).await,
        ]
    });
    println!();
    println!("W3: 8 tasks of one client on one key: lock, hold 1 ms, unlock, for {contention:?}");
    println!(
        "{:<10} {:>8} {:>9} {:>9} {:>9} {:>13}",
        "contender", "acq/s", "wait p50", "wait p99", "wait max", "per task"
    );
    for row in w3_rows {
        println!("{row}");
    }

    // W5: a RedLock over five masters, this server and four more, all pinned to CPU 1.
    let others: Vec<RedisServer> = (0..4).map(|_| RedisServer::start()).collect();
    let pinned_all = pinned && others.iter().all(|other| pin(other.pid(), "1"));
    let single = results[2].percentile(0.5);
    let (w5_w1, w5_w3) = runtime.block_on(async {
        let mut clients = vec![Client::connect(server.url()).await.unwrap()];
        for other in &others {
            clients.push(Client::connect(other.url()).await.unwrap());
        }
        let redlock = RedLock::new(clients.iter().map(|c| c.lock("w5:w1")).collect());
        let w1 = timed("RedLock lock() (5 masters)", warmup, pairs, || async {
            redlock.lock().await.unwrap().unlock().await.unwrap();
        })
        .await;
        let contended = RedLock::new(clients.iter().map(|c| c.lock("w5:w3")).collect());
        (w1, w3("RedLock", contended, contention).await)
    });
    println!(
        "{{\"workload\":\"W5\",\"contender\":\"{}\",\"pairs\":{},\"p50_us\":{:.1},\"p99_us\":{:.1},\"ops_per_s\":{:.0},\"ratio_p50_to_single_node\":{:.3},\"pinned\":{pinned_all}}}",
        w5_w1.name,
        w5_w1.micros.len(),
        w5_w1.percentile(0.5),
        w5_w1.percentile(0.99),
        w5_w1.ops_per_sec(),
        w5_w1.percentile(0.5) / single,
    );
    println!();
    println!("W5: RedLock over 5 masters (all servers pinned: {pinned_all})");
    println!(
        "W1: p50 {:.1} µs, p99 {:.1} µs, {:.0} pairs/s, {:.2}× single-node RLock p50",
        w5_w1.percentile(0.5),
        w5_w1.percentile(0.99),
        w5_w1.ops_per_sec(),
        w5_w1.percentile(0.5) / single
    );
    println!(
        "W3: {:<10} {:>8} {:>9} {:>9} {:>9} {:>13}",
        "contender", "acq/s", "wait p50", "wait p99", "wait max", "per task"
    );
    println!("    {w5_w3}");
    drop(others);

    let (sizes, hold): (&[usize], _) = if quick {
        (&[1_000, 10_000], Duration::from_secs(6))
    } else {
        (&[1_000, 10_000, 100_000], Duration::from_secs(15))
    };
    let rows: Vec<String> = sizes
        .iter()
        .map(|&locks| runtime.block_on(w4(&server, locks, hold)))
        .collect();
    println!();
    println!("W4: one client holds N watchdog locks (3 s watchdog) for {hold:?}");
    println!(
        "{:>8} {:>6} {:>14} {:>9} {:>11} {:>12}",
        "locks", "lost", "calls/100/tick", "client %", "RSS B/lock", "Redis B/lock"
    );
    for row in rows {
        println!("{row}");
    }
}
