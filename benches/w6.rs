//! W6: W1, W2 and W4 on a local Redis Cluster of three masters, beside the same on one
//! Redis, on the current-thread and the multi-thread runtime. Every server on CPU 1, the
//! client on CPU 0.
//!
//! - W1: one task, lock + unlock on one key, in turns: the raw hash-script floor and
//!   `RLock` on each target (the cluster's floor through a redis-rs cluster connection).
//! - W2: 32 tasks of one client, one key each (32 slots on the cluster), 5 s: the same four,
//!   with Redis CPU per pair added up over every master, and script calls per pair.
//! - W4: one client holds 1,000 and 10,000 watchdog locks (3 s watchdog, 100 keys per
//!   renewal call) for 10 s: locks lost, renewal calls per 100 locks per tick and, on the
//!   cluster, per slot the locks touch (a script call may name one slot's keys only).
//!
//! `cargo bench --bench w6` (about 4 minutes). `QUICK=1`: 2,000 pairs, 2 s of W2, 1,000
//! locks for 5 s (about a minute). `PAIRS`, `WARMUP` as for W1; `FLAVOURS=multi_thread`,
//! `TARGETS=cluster`, `PARTS=w1,w4` pick what runs.

use testkit as support;

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis_rlock::{Client, LockGuard};
use support::RedisServer;

use common::cluster::{self, Servers, Target};
use common::floor::{connect, RawHash};
use common::interleave::{interleaved, pair_of, place, Contender, Pair, PairFuture};
use common::options;
use common::report::{fixed, Json, Table};
use common::runtime::{self, Flavour};
use common::stats::{at, process_cpu_micros, sorted, Figures};

/// The runtime flavours W6 runs.
const FLAVOURS: [Flavour; 2] = [Flavour::CurrentThread, Flavour::MultiThread];

/// A redis-rs cluster connection with its default settings, for the cluster's raw floor.
async fn cluster_conn(seeds: &[String]) -> redis::cluster_async::ClusterConnection {
    redis::cluster::ClusterClient::new(seeds.to_vec())
        .expect("valid seeds")
        .get_async_connection()
        .await
        .expect("connect to the benchmark's cluster")
}

/// W1's floor on one target.
async fn w1_floor(target: Target, key: &'static str) -> Contender {
    if target.cluster {
        let floor = RawHash::new(vec![cluster_conn(&target.urls).await], key, 1);
        Contender::new("cluster_floor", "raw hash floor, cluster", move || {
            floor.pair()
        })
    } else {
        let floor = RawHash::new(vec![connect(&target.urls[0]).await], key, 1);
        Contender::new("floor", "raw hash floor, one node", move || floor.pair())
    }
}

/// W1's `RLock` on one target.
async fn w1_lock(target: Target, key: &'static str) -> Contender {
    let lock = target.builder().build().await.unwrap().lock(key);
    let pair = pair_of(lock, |lock| {
        Box::pin(async move { lock.lock().await.unwrap().unlock().await.unwrap() })
    });
    if target.cluster {
        Contender::new("cluster_lock", "RLock lock(), cluster", pair)
    } else {
        Contender::new("lock", "RLock lock(), one node", pair)
    }
}

/// A contender to make on its own runtime.
type Make = Pin<Box<dyn Future<Output = Contender> + Send>>;

/// W1 on `flavour`: both floors and both `RLock`s, in turns.
fn w1(servers: &Servers, flavour: Flavour, warmup: usize, pairs: usize) -> Vec<Figures> {
    let mut makes: Vec<Make> = Vec::new();
    for target in servers.targets() {
        if !options::wanted("TARGETS", target.id) {
            continue;
        }
        makes.push(Box::pin(w1_floor(target.clone(), "w6:w1:raw")));
        makes.push(Box::pin(w1_lock(target, "w6:w1:lock")));
    }
    let placed = makes.into_iter().map(|make| place(flavour, make)).collect();
    interleaved(flavour, placed, warmup, pairs)
}

/// The one-node contender a cluster contender is compared with (itself for a one-node one).
fn counterpart(id: &str) -> &str {
    match id {
        "cluster_floor" => "floor",
        "cluster_lock" => "lock",
        other => other,
    }
}

fn print_w1(figures: &[Figures], flavour: Flavour, warmup: usize, pinned: bool) {
    let p50 = |id: &str| {
        figures
            .iter()
            .find(|f| f.id == id)
            .map_or(f64::NAN, |f| f.percentile(0.5))
    };
    for f in figures {
        Json::new("W6-W1")
            .str("flavour", flavour.id())
            .raw("workers", flavour.worker_threads())
            .str("contender", f.name)
            .str("contender_id", f.id)
            .raw("pairs", f.micros.len())
            .num("p50_us", f.percentile(0.5), 1)
            .num("p99_us", f.percentile(0.99), 1)
            .num("ops_per_s", f.ops_per_sec(), 0)
            .num(
                "ratio_p50_to_one_node",
                f.percentile(0.5) / p50(counterpart(f.id)),
                3,
            )
            .num("client_cpu_us_per_pair", f.cpu_per_pair(), 1)
            .raw("pinned", pinned)
            .print();
    }
    let pairs = figures.first().map_or(0, |f| f.micros.len());
    let table = Table::new(
        &format!(
            "W6-W1: 1 task, lock + unlock on one key ({pairs} pairs each after {warmup} warm-up, in turns; {}; pinned: {pinned})",
            flavour.described()
        ),
        &[
            ("contender", 26),
            ("p50 µs", 9),
            ("p99 µs", 9),
            ("pairs/s", 10),
            ("×one node", 10),
            ("client CPU µs", 14),
        ],
    );
    for f in figures {
        table.row(&[
            f.name.to_string(),
            fixed(f.percentile(0.5), 1),
            fixed(f.percentile(0.99), 1),
            fixed(f.ops_per_sec(), 0),
            fixed(f.percentile(0.5) / p50(counterpart(f.id)), 2),
            fixed(f.cpu_per_pair(), 1),
        ]);
    }
}

const W2_TASKS: usize = 32;

/// Untimed rounds of one pair per task, to open connections and load scripts.
const W2_WARMUP_ROUNDS: usize = 20;

/// What W2 measured of one contender.
struct Throughput {
    /// As W1's contender ids.
    id: &'static str,
    name: &'static str,
    target: &'static str,
    pairs: usize,
    pairs_per_s: f64,
    p50: f64,
    p99: f64,
    /// Added up over every server of the target.
    server_cpu_us_per_pair: f64,
    client_cpu_us_per_pair: f64,
    commands_per_pair: f64,
    script_calls_per_pair: f64,
}

/// One task's timed pairs until `deadline`, in µs each.
async fn timed_pairs(mut pair: Pair, deadline: Instant) -> Vec<f64> {
    let mut micros = Vec::new();
    while Instant::now() < deadline {
        let began = Instant::now();
        pair().await;
        micros.push(began.elapsed().as_secs_f64() * 1e6);
    }
    micros
}

/// W2 for one contender on `servers`: [`W2_TASKS`] tasks, `task(i)` making task `i`'s
/// pairs, each looping for `run`.
async fn w2_one(
    (id, name): (&'static str, &'static str),
    target: &'static str,
    servers: &[&RedisServer],
    run: Duration,
    task: impl Fn(usize) -> Pair,
) -> Throughput {
    cluster::flush(servers);
    let mut pairs: Vec<Pair> = (0..W2_TASKS).map(task).collect();
    for _ in 0..W2_WARMUP_ROUNDS {
        futures_util::future::join_all(pairs.iter_mut().map(|pair| pair())).await;
    }
    let (commands, scripts) = (cluster::commands(servers), cluster::script_calls(servers));
    let (server_cpu, client_cpu) = (cluster::cpu_seconds(servers), process_cpu_micros());
    let started = Instant::now();
    let deadline = started + run;
    let tasks: Vec<_> = pairs
        .into_iter()
        .map(|pair| tokio::spawn(timed_pairs(pair, deadline)))
        .collect();
    let mut micros = Vec::new();
    for task in tasks {
        micros.extend(task.await.unwrap());
    }
    let elapsed = started.elapsed().as_secs_f64();
    let client_cpu = process_cpu_micros() - client_cpu;
    let server_cpu = cluster::cpu_seconds(servers) - server_cpu;
    let commands = cluster::commands(servers) - commands;
    let scripts = cluster::script_calls(servers) - scripts;
    let micros = sorted(micros);
    let pairs = micros.len() as f64;
    Throughput {
        id,
        name,
        target,
        pairs: micros.len(),
        pairs_per_s: pairs / elapsed,
        p50: at(&micros, 0.5),
        p99: at(&micros, 0.99),
        server_cpu_us_per_pair: server_cpu * 1e6 / pairs,
        client_cpu_us_per_pair: client_cpu / pairs,
        commands_per_pair: commands as f64 / pairs,
        script_calls_per_pair: scripts as f64 / pairs,
    }
}

fn boxed<F>(pair: F) -> Pair
where
    F: FnMut() -> PairFuture + Send + 'static,
{
    Box::new(pair)
}

/// W2 on every target, on the current runtime.
async fn w2(servers: &Servers, run: Duration) -> Vec<Throughput> {
    let mut results = Vec::new();
    for target in servers.targets() {
        if !options::wanted("TARGETS", target.id) {
            continue;
        }
        let on = servers.of(&target);
        if target.cluster {
            let conn = cluster_conn(&target.urls).await;
            let floor = |i| {
                let floor = RawHash::new(vec![conn.clone()], &format!("w6:w2:raw:{i}"), i);
                boxed(move || floor.pair())
            };
            let name = ("cluster_floor", "raw hash floor, cluster");
            results.push(w2_one(name, target.id, &on, run, floor).await);
        } else {
            let conn = connect(&target.urls[0]).await;
            let floor = |i| {
                let floor = RawHash::new(vec![conn.clone()], &format!("w6:w2:raw:{i}"), i);
                boxed(move || floor.pair())
            };
            let name = ("floor", "raw hash floor, one node");
            results.push(w2_one(name, target.id, &on, run, floor).await);
        }
        let client = target.builder().build().await.unwrap();
        let library = |i| {
            let lock = Arc::new(client.lock(format!("w6:w2:lock:{i}")));
            boxed(move || {
                let lock = lock.clone();
                Box::pin(async move { lock.lock().await.unwrap().unlock().await.unwrap() })
            })
        };
        let name = if target.cluster {
            ("cluster_lock", "RLock lock(), cluster")
        } else {
            ("lock", "RLock lock(), one node")
        };
        results.push(w2_one(name, target.id, &on, run, library).await);
        cluster::flush(&on);
    }
    results
}

fn print_w2(results: &[Throughput], flavour: Flavour, run: Duration, pinned: bool) {
    // Each cluster contender's server CPU beside its one-node counterpart's.
    let ratio = |t: &Throughput| {
        results
            .iter()
            .find(|r| r.id == counterpart(t.id))
            .map_or(f64::NAN, |base| {
                t.server_cpu_us_per_pair / base.server_cpu_us_per_pair
            })
    };
    for t in results {
        Json::new("W6-W2")
            .str("flavour", flavour.id())
            .raw("workers", flavour.worker_threads())
            .str("target", t.target)
            .str("contender", t.name)
            .raw("tasks", W2_TASKS)
            .raw("pairs", t.pairs)
            .num("pairs_per_s", t.pairs_per_s, 0)
            .num("p50_us", t.p50, 1)
            .num("p99_us", t.p99, 1)
            .num("server_cpu_us_per_pair", t.server_cpu_us_per_pair, 2)
            .num("client_cpu_us_per_pair", t.client_cpu_us_per_pair, 2)
            .num("redis_commands_per_pair", t.commands_per_pair, 2)
            .num("script_calls_per_pair", t.script_calls_per_pair, 2)
            .num("server_cpu_ratio_to_one_node", ratio(t), 3)
            .raw("pinned", pinned)
            .print();
    }
    let table = Table::new(
        &format!(
            "W6-W2: {W2_TASKS} tasks of one client, one key each, lock + unlock for {run:?} ({}; pinned: {pinned})",
            flavour.described()
        ),
        &[
            ("contender", 26),
            ("pairs/s", 10),
            ("p50 µs", 9),
            ("p99 µs", 9),
            ("srv µs/pair", 12),
            ("×one node", 10),
            ("cli µs/pair", 12),
            ("cmds/pair", 10),
            ("scripts/pair", 13),
        ],
    );
    for t in results {
        table.row(&[
            t.name.to_string(),
            fixed(t.pairs_per_s, 0),
            fixed(t.p50, 1),
            fixed(t.p99, 1),
            fixed(t.server_cpu_us_per_pair, 2),
            fixed(ratio(t), 2),
            fixed(t.client_cpu_us_per_pair, 2),
            fixed(t.commands_per_pair, 2),
            fixed(t.script_calls_per_pair, 2),
        ]);
    }
}

/// What one W4 run measured.
struct Held {
    target: &'static str,
    locks: usize,
    lost: usize,
    /// Distinct hash slots of the locks' keys, on the cluster.
    slots: Option<usize>,
    calls_per_100_per_tick: f64,
    calls_per_slot_per_tick: Option<f64>,
    client_cpu_percent: f64,
}

/// W4: one client of `target` holds `locks` watchdog locks (3 s watchdog: a renewal round
/// a second) for `hold`.
async fn w4_one(target: &Target, servers: &[&RedisServer], locks: usize, hold: Duration) -> Held {
    let client: Client = target
        .builder()
        .watchdog_timeout(Duration::from_secs(3))
        .build()
        .await
        .unwrap();
    let names: Vec<String> = (0..locks).map(|i| format!("w6:w4:{locks}:{i}")).collect();
    let mut guards: Vec<LockGuard> = Vec::with_capacity(locks);
    for chunk in names.chunks(512) {
        let taking = chunk.iter().map(|name| {
            let lock = client.lock(name);
            async move { lock.lock().await.unwrap() }
        });
        guards.extend(futures_util::future::join_all(taking).await);
    }
    let slots = target.cluster.then(|| {
        let slots: std::collections::HashSet<u16> = names
            .iter()
            .map(|n| support::key_slot(n.as_bytes()))
            .collect();
        slots.len()
    });
    let calls_before = cluster::script_calls(servers);
    let cpu_before = process_cpu_micros();
    tokio::time::sleep(hold).await;
    let cpu = process_cpu_micros() - cpu_before;
    let calls = (cluster::script_calls(servers) - calls_before) as f64;
    // A renewal round every watchdog / 3 = 1 s.
    let ticks = hold.as_secs_f64();
    let lost = guards.iter().filter(|g| g.is_lost()).count();
    let mut rest = guards.into_iter().peekable();
    while rest.peek().is_some() {
        let releasing = rest.by_ref().take(512).map(LockGuard::unlock);
        futures_util::future::join_all(releasing).await;
    }
    cluster::flush(servers);
    Held {
        target: target.id,
        locks,
        lost,
        slots,
        calls_per_100_per_tick: calls / ticks / (locks as f64 / 100.0),
        calls_per_slot_per_tick: slots.map(|slots| calls / ticks / slots as f64),
        client_cpu_percent: cpu / 1e6 / hold.as_secs_f64() * 100.0,
    }
}

/// W4's sizes and how long each is held.
fn w4_runs() -> (Vec<usize>, Duration) {
    if options::quick() {
        (vec![1_000], Duration::from_secs(5))
    } else {
        (vec![1_000, 10_000], Duration::from_secs(10))
    }
}

/// W4 on every target and size, on the current runtime.
async fn w4(servers: &Servers) -> (Vec<Held>, Duration) {
    let (sizes, hold) = w4_runs();
    let mut results = Vec::new();
    for target in servers.targets() {
        if !options::wanted("TARGETS", target.id) {
            continue;
        }
        let on = servers.of(&target);
        for &locks in &sizes {
            results.push(w4_one(&target, &on, locks, hold).await);
        }
    }
    (results, hold)
}

fn print_w4(results: &[Held], flavour: Flavour, hold: Duration, pinned: bool) {
    for h in results {
        Json::new("W6-W4")
            .str("flavour", flavour.id())
            .raw("workers", flavour.worker_threads())
            .str("target", h.target)
            .raw("locks", h.locks)
            .raw("hold_s", hold.as_secs())
            .raw("lost", h.lost)
            .raw(
                "slots_touched",
                h.slots.map_or("null".into(), |s| s.to_string()),
            )
            .num(
                "renewal_calls_per_100_locks_per_tick",
                h.calls_per_100_per_tick,
                2,
            )
            .raw(
                "renewal_calls_per_slot_touched_per_tick",
                h.calls_per_slot_per_tick
                    .map_or("null".into(), |c| format!("{c:.3}")),
            )
            .num("client_cpu_percent", h.client_cpu_percent, 1)
            .raw("pinned", pinned)
            .print();
    }
    let table = Table::new(
        &format!(
            "W6-W4: one client holds N watchdog locks (3 s watchdog, 100 keys per call) for {hold:?} ({}; pinned: {pinned})",
            flavour.described()
        ),
        &[
            ("target", 10),
            ("locks", 7),
            ("lost", 5),
            ("slots", 6),
            ("calls/100/tick", 15),
            ("calls/slot/tick", 16),
            ("client %", 9),
        ],
    );
    for h in results {
        table.row(&[
            h.target.to_string(),
            h.locks.to_string(),
            h.lost.to_string(),
            h.slots.map_or("—".into(), |s| s.to_string()),
            fixed(h.calls_per_100_per_tick, 2),
            h.calls_per_slot_per_tick
                .map_or("—".into(), |c| fixed(c, 3)),
            fixed(h.client_cpu_percent, 1),
        ]);
    }
}

fn main() {
    let (warmup, pairs) = options::pairs();
    let run = options::contention();
    let servers = Arc::new(Servers::start());
    let pinned = servers.pinned;
    for flavour in FLAVOURS {
        if !options::wanted("FLAVOURS", flavour.id()) {
            continue;
        }
        if options::wanted("PARTS", "w1") {
            let figures = w1(&servers, flavour, warmup, pairs);
            print_w1(&figures, flavour, warmup, pinned);
        }
        if options::wanted("PARTS", "w2") {
            let runtime = flavour.runtime();
            let on = servers.clone();
            let results = flavour.run(&runtime, async move { w2(&on, run).await });
            runtime::shut_down(runtime);
            print_w2(&results, flavour, run, pinned);
        }
        if options::wanted("PARTS", "w4") {
            let runtime = flavour.runtime();
            let on = servers.clone();
            let (results, hold) = flavour.run(&runtime, async move { w4(&on).await });
            runtime::shut_down(runtime);
            print_w4(&results, flavour, hold, pinned);
        }
    }
}
