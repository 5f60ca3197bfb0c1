//! W2: 32 tasks of one client, one key each, lock + unlock for 5 s: the raw hash-script
//! floor, the raw SET NX floor, rslock 0.10 and `RLock`, with pairs/s, latency, and
//! redis-server CPU, client CPU and Redis commands per pair; on the current-thread and the
//! multi-thread runtime, each contender beside the floors and rslock on that same runtime.
//! Server on CPU 1, client on CPU 0.
//!
//! `cargo bench --bench w2` (`QUICK=1`: 2 s each; `CONTENDERS`, `FLAVOURS` pick what runs).

use testkit as support;

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis_rlock::Client;
use rslock::LockManager;
use support::RedisServer;

use common::floor::{connect, RawHash, RawSetNx};
use common::interleave::{Pair, PairFuture};
use common::options;
use common::placement::{self, SPLIT};
use common::report::{fixed, Json, Table};
use common::runtime::{self, Flavour};
use common::stats::{at, process_cpu_micros, sorted};

const TASKS: usize = 32;

/// Untimed rounds of one pair per task, to open connections and load scripts.
const WARMUP_ROUNDS: usize = 20;

/// What W2 measured for one contender.
struct Throughput {
    name: &'static str,
    pairs: usize,
    run_s: f64,
    pairs_per_s: f64,
    p50: f64,
    p99: f64,
    server_cpu_us_per_pair: f64,
    /// Every thread of the client process: the tasks and the connections' drivers.
    client_cpu_us_per_pair: f64,
    /// Commands Redis ran per pair, inside scripts or not.
    commands_per_pair: f64,
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

/// Counters read before and after the timed run.
struct Before {
    commands: u64,
    server_cpu: f64,
    client_cpu: f64,
    started: Instant,
}

impl Before {
    fn now(server: &RedisServer) -> Before {
        Before {
            commands: common::server::commands(server),
            server_cpu: common::server::cpu_seconds(server),
            client_cpu: process_cpu_micros(),
            started: Instant::now(),
        }
    }

    fn throughput(self, name: &'static str, server: &RedisServer, micros: Vec<f64>) -> Throughput {
        let run_s = self.started.elapsed().as_secs_f64();
        let client_cpu = process_cpu_micros() - self.client_cpu;
        let server_cpu = common::server::cpu_seconds(server) - self.server_cpu;
        let commands = common::server::commands(server) - self.commands;
        let micros = sorted(micros);
        let pairs = micros.len() as f64;
        Throughput {
            name,
            pairs: micros.len(),
            run_s,
            pairs_per_s: pairs / run_s,
            p50: at(&micros, 0.5),
            p99: at(&micros, 0.99),
            server_cpu_us_per_pair: server_cpu * 1e6 / pairs,
            client_cpu_us_per_pair: client_cpu / pairs,
            commands_per_pair: commands as f64 / pairs,
        }
    }
}

/// W2 for one contender: [`TASKS`] tasks, `task(i)` making the pairs of task `i`, each
/// looping for `run`. The keyspace is emptied first, so that keys an earlier contender left
/// to expire are not expired on this one's server CPU time.
async fn w2(
    name: &'static str,
    server: &RedisServer,
    run: Duration,
    task: impl Fn(usize) -> Pair,
) -> Throughput {
    server.cli(&["FLUSHALL"]);
    let mut pairs: Vec<Pair> = (0..TASKS).map(task).collect();
    for _ in 0..WARMUP_ROUNDS {
        futures_util::future::join_all(pairs.iter_mut().map(|pair| pair())).await;
    }
    let before = Before::now(server);
    let deadline = before.started + run;
    let tasks: Vec<_> = pairs
        .into_iter()
        .map(|pair| tokio::spawn(timed_pairs(pair, deadline)))
        .collect();
    let mut micros = Vec::new();
    for task in tasks {
        micros.extend(task.await.unwrap());
    }
    before.throughput(name, server, micros)
}

/// A pair maker from a function of nothing that returns the pair's future.
fn pair_of<F>(pair: F) -> Pair
where
    F: FnMut() -> PairFuture + Send + 'static,
{
    Box::new(pair)
}

/// Every contender on `server`, on the current runtime, those `CONTENDERS` asks for.
async fn contenders(server: &RedisServer, run: Duration) -> Vec<Throughput> {
    let conn = connect(&server.url()).await;
    let manager = Arc::new(LockManager::new(vec![server.url()]));
    let client = Client::connect(server.url()).await.unwrap();
    let mut results = Vec::new();
    if options::wanted("CONTENDERS", "floor") {
        let floor = |i| {
            let floor = RawHash::new(vec![conn.clone()], &format!("w2:raw:{i}"), i);
            pair_of(move || floor.pair())
        };
        results.push(w2("raw hash-script floor", server, run, floor).await);
    }
    if options::wanted("CONTENDERS", "setnx") {
        let set_nx = |i| {
            let floor = RawSetNx::new(conn.clone(), &format!("w2:setnx:{i}"));
            pair_of(move || floor.pair())
        };
        results.push(w2("raw SET NX floor", server, run, set_nx).await);
    }
    if options::wanted("CONTENDERS", "rslock") {
        let rslock = |i| {
            let manager = manager.clone();
            let resource: Arc<[u8]> = format!("w2:rslock:{i}").into_bytes().into();
            pair_of(move || {
                let (manager, resource) = (manager.clone(), resource.clone());
                Box::pin(async move {
                    let lock = manager
                        .lock(&resource[..], Duration::from_secs(30))
                        .await
                        .expect("rslock takes an uncontended key");
                    manager.unlock(&lock).await;
                })
            })
        };
        results.push(w2("rslock 0.10", server, run, rslock).await);
    }
    if options::wanted("CONTENDERS", "lock") {
        let library = |i| {
            let lock = Arc::new(client.lock(format!("w2:rlock:{i}")));
            pair_of(move || {
                let lock = lock.clone();
                Box::pin(async move { lock.lock().await.unwrap().unlock().await.unwrap() })
            })
        };
        results.push(w2("RLock lock() (watchdog)", server, run, library).await);
    }
    server.cli(&["FLUSHALL"]);
    results
}

/// pairs/s of the contender named `name`, or 1 when it was left out.
fn pairs_per_s(results: &[Throughput], name: &str) -> f64 {
    results
        .iter()
        .find(|t| t.name == name)
        .map_or(1.0, |t| t.pairs_per_s)
}

fn print(results: &[Throughput], flavour: Flavour, run: Duration, pinned: bool) {
    let rslock = pairs_per_s(results, "rslock 0.10");
    let floor = pairs_per_s(results, "raw hash-script floor");
    for t in results {
        Json::new("W2")
            .str("flavour", flavour.id())
            .raw("workers", flavour.worker_threads())
            .str("contender", t.name)
            .raw("tasks", TASKS)
            .num("run_s", t.run_s, 1)
            .raw("pairs", t.pairs)
            .num("pairs_per_s", t.pairs_per_s, 0)
            .num("p50_us", t.p50, 1)
            .num("p99_us", t.p99, 1)
            .num("server_cpu_us_per_pair", t.server_cpu_us_per_pair, 2)
            .num("client_cpu_us_per_pair", t.client_cpu_us_per_pair, 2)
            .num("redis_commands_per_pair", t.commands_per_pair, 2)
            .num("ratio_to_rslock", t.pairs_per_s / rslock, 3)
            .num("ratio_to_raw_hash_floor", t.pairs_per_s / floor, 3)
            .raw("pinned", pinned)
            .print();
    }
    let title = format!(
        "W2: {TASKS} tasks of one client, one key each, lock + unlock for {run:?} ({}; server pinned: {pinned})",
        flavour.described()
    );
    let table = Table::new(
        &title,
        &[
            ("contender", 30),
            ("pairs/s", 10),
            ("p50 µs", 9),
            ("p99 µs", 9),
            ("srv µs/pair", 12),
            ("cli µs/pair", 12),
            ("cmds/pair", 10),
            ("×rslock", 8),
            ("×floor", 8),
        ],
    );
    for t in results {
        table.row(&[
            t.name.to_string(),
            fixed(t.pairs_per_s, 0),
            fixed(t.p50, 1),
            fixed(t.p99, 1),
            fixed(t.server_cpu_us_per_pair, 2),
            fixed(t.client_cpu_us_per_pair, 2),
            fixed(t.commands_per_pair, 2),
            fixed(t.pairs_per_s / rslock, 2),
            fixed(t.pairs_per_s / floor, 2),
        ]);
    }
}

fn main() {
    let run = options::contention();
    let (server, pinned) = placement::start(SPLIT);
    let server = Arc::new(server);
    for flavour in [Flavour::CurrentThread, Flavour::MultiThread] {
        if !options::wanted("FLAVOURS", flavour.id()) {
            continue;
        }
        let runtime = flavour.runtime();
        let on = server.clone();
        let results = flavour.run(&runtime, async move { contenders(&on, run).await });
        runtime::shut_down(runtime);
        print(&results, flavour, run, pinned);
    }
}
