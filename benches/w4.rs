//! W4: one client holds N watchdog locks (N = 1,000 / 10,000 / 100,000) with a 3 s watchdog
//! for 15 s, each size with 100 keys per renewal call and the largest with 500 too, beside
//! the same renewals sent raw: locks lost, renewal calls per 100 locks per tick, Redis time
//! per call, client CPU, client RSS and Redis memory per lock. Current-thread runtime; server
//! on CPU 1, client on CPU 0.
//!
//! `cargo bench --bench w4` (`QUICK=1`: 1,000 and 10,000 locks for 6 s; `W4_LOCKS=100000`
//! for one size).

use testkit as support;

mod common;

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use redis::Script;
use redis_rlock::{Client, LockGuard};
use support::RedisServer;

use common::floor::{connect, RENEW_SOURCE};
use common::options;
use common::placement::{self, SPLIT};
use common::report::{Json, Table};
use common::runtime::Flavour;
use common::server::{evalsha_calls_and_usec, used_memory};
use common::stats::{process_cpu_micros, rss_bytes};

/// The raw floor's owner field.
const OWNER: &str = "00000000-0000-4000-8000-000000000000:1";

/// Client CPU since `before` (µs, from [`process_cpu_micros`]) over `hold`, in % of a core.
fn cpu_percent(before: f64, hold: Duration) -> f64 {
    (process_cpu_micros() - before) / 1e6 / hold.as_secs_f64() * 100.0
}

/// Writes `locks` lock hashes for the raw floor, each held by [`OWNER`] for 3 s.
async fn raw_locks(url: &str, locks: usize) -> Vec<String> {
    let conn = connect(url).await;
    let keys: Vec<String> = (0..locks).map(|i| format!("w4:raw:{locks}:{i}")).collect();
    for chunk in keys.chunks(512) {
        let mut pipe = redis::pipe();
        for key in chunk {
            pipe.hset(key, OWNER, 1).ignore();
            pipe.pexpire(key, 3_000).ignore();
        }
        let () = pipe.query_async(&mut conn.clone()).await.unwrap();
    }
    keys
}

/// One raw renewal call of `lua/renew.lua` over `batch`.
fn renew_call(renew: &Script, batch: &[String]) -> redis::Cmd {
    let mut call = redis::cmd("EVALSHA");
    call.arg(renew.get_hash()).arg(batch.len());
    for key in batch {
        call.arg(key);
    }
    call.arg(3_000);
    for _ in batch {
        call.arg(OWNER);
    }
    call
}

/// The floor of W4: `lua/renew.lua` called directly over `locks` lock
/// hashes, in batches of `batch` with 4 in flight (as the watchdog sends them), a round every
/// second for `hold`. Returns the client CPU it took, in % of a core.
async fn raw_floor(server: &RedisServer, locks: usize, hold: Duration, batch: usize) -> f64 {
    let conn = connect(&server.url()).await;
    let renew = Script::new(RENEW_SOURCE);
    // The script must be known before the floor's first EVALSHA.
    let _: String = renew
        .prepare_invoke()
        .load_async(&mut conn.clone())
        .await
        .unwrap();
    let keys = raw_locks(&server.url(), locks).await;
    let cpu_before = process_cpu_micros();
    let started = Instant::now();
    while started.elapsed() < hold {
        let round = Instant::now();
        let renewed: Vec<Vec<i64>> = futures_util::stream::iter(keys.chunks(batch))
            .map(|batch| {
                let (call, mut conn) = (renew_call(&renew, batch), conn.clone());
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
    let cpu = cpu_percent(cpu_before, hold);
    server.cli(&["FLUSHALL"]);
    cpu
}

/// Takes `locks` watchdog locks of `client`, 512 at a time.
async fn take_locks(client: &Client, locks: usize) -> Vec<LockGuard> {
    let mut guards = Vec::with_capacity(locks);
    let names: Vec<usize> = (0..locks).collect();
    for chunk in names.chunks(512) {
        let taking = chunk.iter().map(|i| {
            let lock = client.lock(format!("w4:{locks}:{i}"));
            async move { lock.lock().await.unwrap() }
        });
        guards.extend(futures_util::future::join_all(taking).await);
    }
    guards
}

/// Releases `guards` in chunks, as they were taken: 100,000 unlocks at once on this one
/// thread would starve the watchdog past the lease. Returns how many were lost meanwhile.
async fn release_all(guards: Vec<LockGuard>) -> usize {
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
    lost_at_release
}

/// What one W4 run measured.
struct Held {
    locks: usize,
    batch: usize,
    lost: usize,
    lost_at_release: usize,
    per_100_per_tick: f64,
    redis_us_per_call: f64,
    cpu_percent: f64,
    /// Only in the first run of a size: a later one reuses the memory the first gave back.
    rss_per_lock: Option<f64>,
    redis_per_lock: f64,
}

/// W4: one client holds `locks` watchdog locks (3 s watchdog, `batch` keys per renewal
/// call) for `hold`.
async fn w4(
    server: &RedisServer,
    locks: usize,
    hold: Duration,
    batch: usize,
    first_of_size: bool,
) -> Held {
    let client = Client::builder(server.url())
        .watchdog_timeout(Duration::from_secs(3))
        .watchdog_batch_size(batch)
        .build()
        .await
        .unwrap();
    let (rss_before, redis_before) = (rss_bytes(), used_memory(server));
    let guards = take_locks(&client, locks).await;
    let (rss_after, redis_after) = (rss_bytes(), used_memory(server));
    let (calls_before, usec_before) = evalsha_calls_and_usec(server);
    let cpu_before = process_cpu_micros();
    tokio::time::sleep(hold).await;
    let cpu_percent = cpu_percent(cpu_before, hold);
    let (calls, usec) = evalsha_calls_and_usec(server);
    let renewal_calls = calls - calls_before;
    let ticks = hold.as_secs_f64() / 1.0; // a renewal round every watchdog/3 = 1 s
    Held {
        locks,
        batch,
        lost: guards.iter().filter(|g| g.is_lost()).count(),
        lost_at_release: release_all(guards).await,
        per_100_per_tick: renewal_calls as f64 / ticks / (locks as f64 / 100.0),
        // How long each renewal call keeps Redis from serving anyone else.
        redis_us_per_call: (usec - usec_before) as f64 / renewal_calls.max(1) as f64,
        cpu_percent,
        rss_per_lock: first_of_size.then(|| (rss_after - rss_before) as f64 / locks as f64),
        redis_per_lock: (redis_after - redis_before) as f64 / locks as f64,
    }
}

impl Held {
    fn print_json(&self, hold: Duration) {
        let rss = self
            .rss_per_lock
            .map_or("null".to_string(), |b| format!("{b:.0}"));
        Json::new("W4")
            .raw("locks", self.locks)
            .raw("keys_per_call", self.batch)
            .raw("hold_s", hold.as_secs())
            .raw("lost", self.lost)
            .raw("lost_at_release", self.lost_at_release)
            .num(
                "renewal_calls_per_100_locks_per_tick",
                self.per_100_per_tick,
                2,
            )
            .num("client_cpu_percent", self.cpu_percent, 1)
            .num("redis_us_per_renewal_call", self.redis_us_per_call, 0)
            .raw("client_rss_bytes_per_lock", rss)
            .num("redis_bytes_per_lock", self.redis_per_lock, 0)
            .print();
    }

    fn cells(&self, floor_percent: f64) -> Vec<String> {
        let rss = self
            .rss_per_lock
            .map_or("—".to_string(), |b| format!("{b:.0}"));
        vec![
            self.locks.to_string(),
            self.batch.to_string(),
            self.lost.to_string(),
            format!("{:.2}", self.per_100_per_tick),
            format!("{:.0}", self.redis_us_per_call),
            format!("{:.1}", self.cpu_percent),
            rss,
            format!("{:.0}", self.redis_per_lock),
            format!("{floor_percent:.1}"),
        ]
    }
}

/// The sizes and batch sizes to run: each size with the default 100 keys per renewal call,
/// the largest also with 500, to show what the number of calls costs the client.
fn runs() -> (Vec<(usize, usize)>, Duration) {
    let (mut sizes, hold) = if options::quick() {
        (vec![1_000, 10_000], Duration::from_secs(6))
    } else {
        (vec![1_000, 10_000, 100_000], Duration::from_secs(15))
    };
    if let Some(only) = std::env::var("W4_LOCKS").ok().and_then(|n| n.parse().ok()) {
        sizes = vec![only];
    }
    let mut runs: Vec<(usize, usize)> = sizes.iter().map(|&locks| (locks, 100)).collect();
    runs.push((*sizes.last().expect("a W4 size"), 500));
    (runs, hold)
}

fn main() {
    let (server, _pinned) = placement::start(SPLIT);
    let (runs, hold) = runs();
    let flavour = Flavour::CurrentThread;
    let runtime = flavour.runtime();
    let mut rows = Vec::new();
    for (locks, batch) in runs {
        let held = runtime.block_on(w4(&server, locks, hold, batch, batch == 100));
        held.print_json(hold);
        let floor = runtime.block_on(raw_floor(&server, locks, hold, batch));
        Json::new("W4")
            .str("contender", "raw renew.lua floor")
            .raw("locks", locks)
            .raw("keys_per_call", batch)
            .raw("hold_s", hold.as_secs())
            .num("client_cpu_percent", floor, 1)
            .print();
        rows.push(held.cells(floor));
    }
    let table = Table::new(
        &format!("W4: one client holds N watchdog locks (3 s watchdog) for {hold:?}"),
        &[
            ("locks", 8),
            ("keys/call", 10),
            ("lost", 6),
            ("calls/100/tick", 14),
            ("Redis µs/call", 12),
            ("client %", 9),
            ("RSS B/lock", 11),
            ("Redis B/lock", 12),
            ("raw floor %", 12),
        ],
    );
    for row in rows {
        table.row(&row);
    }
}
