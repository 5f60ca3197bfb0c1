//! Redisson beside the crate: W1–W3 for the crate's `RLock` and `FairLock` (and the raw
//! hash-script floor in W1 and W2) on both tokio runtime flavours, and for Redisson's
//! `RLock` (blocking and async API) and `RFairLock`, with Redisson's defaults, in a JVM
//! (the interop suite's Java driver, `interop/redisson/`, its entry point `Bench.java`).
//! One redis-server on CPU 1; the client, its runtimes and the JVM on CPU 0. Every
//! contender takes turns on the same server (W1 blocks of 100 pairs, W2 and W3 slices of
//! 1 s), with Redis emptied and its counters read around each turn: what it spent on each
//! contender, CPU and commands by name, per pair. The JVM's JIT is warmed on each workload
//! until compilation is quiet before its first turn.
//!
//! `cargo bench --bench redisson`: about 8 minutes, most of it the JIT's warm-ups (`QUICK=1`:
//! about 2). Besides `QUICK`, `PAIRS`, `WARMUP` (see `common/options.rs`):
//! `WORKLOADS=w1,w2,w3`; `CONTENDERS=floor,lock,fair,redisson_lock,redisson_lock_async,
//! redisson_fair`; `FLAVOURS=current_thread,multi_thread` (the crate's runtimes);
//! `JIT_QUIET_S` (the quiet window, 2 s) and `JIT_WARMUP_MAX_S` (the bound on one
//! workload's warm-up, 120 s, with `QUICK` 20 s); `REDISSON_VERSION` (another release than
//! the one `interop/redisson/pom.xml` pins; the driver is rebuilt for it).

use testkit as support;

mod common;

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use redis_rlock::Client;
use tokio::runtime::Runtime;

use common::beside::{self, Field, Kind, Row};
use common::contend::{contend, Contention, Single, Taker};
use common::floor::{connect, RawHash};
use common::interleave::{pair_of, Pair, BLOCK};
use common::jvm::{driver_jar, Jvm};
use common::options;
use common::placement::{self, SPLIT};
use common::redis_use::{Meter, Spent};
use common::runtime::{shut_down, Flavour};
use common::stats::{at, process_cpu_micros, sorted};

/// The crate's contenders: id (in `CONTENDERS`), name, kind.
const OURS: [(&str, &str, Kind); 3] = [
    ("floor", "raw hash-script floor", Kind::Lock),
    ("lock", "RLock lock()", Kind::Lock),
    ("fair", "FairLock lock()", Kind::Fair),
];

/// Redisson's: id, its API in `Bench.java`, name, kind.
const THEIRS: [(&str, &str, &str, Kind); 3] = [
    ("redisson_lock", "lock", "Redisson RLock lock()", Kind::Lock),
    (
        "redisson_lock_async",
        "lock_async",
        "Redisson RLock lockAsync()",
        Kind::Lock,
    ),
    (
        "redisson_fair",
        "fair",
        "Redisson RFairLock lock()",
        Kind::Fair,
    ),
];

/// W2 and W3 turns are slices of this length.
const SLICE: Duration = Duration::from_secs(1);

/// W2: tasks (Redisson: threads or async callers) of one client, one key each.
const W2_TASKS: usize = 32;

/// W2: untimed rounds of one pair per task before the first slice, as `w2.rs` runs.
const W2_WARMUP_ROUNDS: usize = 20;

const W1_FIELDS: [Field; 4] = [
    ("p50_us", "p50 µs", 8, 1),
    ("p99_us", "p99 µs", 8, 1),
    ("ops_per_s", "pairs/s", 7, 0),
    ("client_cpu_us_per_pair", "client µs/pair", 14, 1),
];

const W2_FIELDS: [Field; 4] = [
    ("pairs_per_s", "pairs/s", 7, 0),
    ("p50_us", "p50 µs", 8, 1),
    ("p99_us", "p99 µs", 9, 1),
    ("client_cpu_us_per_pair", "client µs/pair", 14, 1),
];

const W3_FIELDS: [Field; 5] = [
    ("acquisitions_per_s", "acq/s", 5, 0),
    ("wait_p50_ms", "wait p50 ms", 11, 2),
    ("wait_p99_ms", "wait p99 ms", 11, 2),
    ("wait_max_ms", "wait max ms", 11, 2),
    ("client_cpu_us_per_pair", "client µs/acq", 13, 1),
];

/// What every workload runs with.
struct Bench {
    url: String,
    jvm: Jvm,
    meter: Meter,
    pinned: bool,
    warmup_max: Duration,
}

impl Bench {
    /// Runs `turn` with Redis emptied first and its spending counted into `spent`.
    fn turn<R>(&mut self, spent: &mut Spent, turn: impl FnOnce(&mut Jvm) -> R) -> R {
        self.meter.flush();
        let before = self.meter.read();
        let result = turn(&mut self.jvm);
        spent.add(self.meter.since(&before));
        result
    }

    /// Warms Redisson's `theirs` on `workload` and says how it went.
    fn warm(&mut self, workload: &str, theirs: &[Theirs]) {
        if theirs.is_empty() {
            return;
        }
        let apis: Vec<&str> = theirs.iter().map(|t| t.api).collect();
        let warmed = self.jvm.warm(workload, &apis, self.warmup_max);
        let quiet = if warmed["jit_quiet"] == true {
            format!("compilation quiet for {} s", warmed["jit_quiet_window_s"])
        } else {
            "compilation NOT yet quiet: the bound on the warm-up ran out".to_string()
        };
        println!(
            "\nRedisson's JIT warm-up on {workload} ({}): {} s, {} rounds, {quiet} ({} ms of compilation in all)",
            apis.join(", "),
            warmed["warmup_s"],
            warmed["warmup_rounds"],
            warmed["jit_compilation_ms"]
        );
    }
}

/// One of the crate's contenders on a runtime of its own (as in W1), and what its turns
/// measured so far: `S` is the workload's own state, moved onto the runtime for each turn.
struct Ours<S> {
    flavour: Flavour,
    runtime: Runtime,
    id: &'static str,
    name: &'static str,
    kind: Kind,
    state: Option<S>,
    /// The client process's CPU over the turns (every thread), µs.
    cpu_us: f64,
    spent: Spent,
}

impl<S: Send + 'static> Ours<S> {
    /// The crate's contenders `CONTENDERS` and `FLAVOURS` ask for (the floor left out
    /// unless `with_floor`), each with the state `make` gives on its runtime.
    fn all<F>(with_floor: bool, make: impl Fn(&'static str, Flavour) -> F) -> Vec<Ours<S>>
    where
        F: Future<Output = S> + Send + 'static,
    {
        let flavours = [Flavour::CurrentThread, Flavour::MultiThread]
            .into_iter()
            .filter(|f| options::wanted("FLAVOURS", f.id()));
        flavours
            .flat_map(|flavour| OURS.map(|(id, name, kind)| (flavour, id, name, kind)))
            .filter(|(_, id, ..)| {
                (with_floor || *id != "floor") && options::wanted("CONTENDERS", id)
            })
            .map(|(flavour, id, name, kind)| {
                let runtime = flavour.runtime();
                let state = flavour.run(&runtime, make(id, flavour));
                Ours {
                    flavour,
                    runtime,
                    id,
                    name,
                    kind,
                    state: Some(state),
                    cpu_us: 0.0,
                    spent: Spent::default(),
                }
            })
            .collect()
    }

    /// One turn: `work` on the state, on the contender's runtime.
    fn turn<F>(&mut self, bench: &mut Bench, work: impl FnOnce(S) -> F)
    where
        F: Future<Output = S> + Send + 'static,
    {
        let state = self.state.take().expect("one turn at a time");
        let (flavour, runtime) = (self.flavour, &self.runtime);
        // Inside the turn: reading Redis' counters is the benchmark's work, not the pairs'.
        let (state, cpu_us) = bench.turn(&mut self.spent, |_| {
            let cpu = process_cpu_micros();
            let state = flavour.run(runtime, work(state));
            (state, process_cpu_micros() - cpu)
        });
        self.cpu_us += cpu_us;
        self.state = Some(state);
    }

    /// Its row: `values` of the final state give the pairs and the workload's fields.
    fn row(self, values: impl FnOnce(S, f64) -> (f64, Vec<f64>, Option<(usize, usize)>)) -> Row {
        let state = self.state.expect("measured");
        let (pairs, values, per_task) = values(state, self.cpu_us);
        shut_down(self.runtime);
        Row {
            id: self.id,
            name: self.name,
            runtime: self.flavour.id(),
            kind: self.kind,
            pairs,
            values,
            per_task,
            redis: self.spent,
            jvm: None,
        }
    }
}

/// One of Redisson's contenders, and what Redis spent on its turns.
struct Theirs {
    id: &'static str,
    api: &'static str,
    name: &'static str,
    kind: Kind,
    spent: Spent,
}

impl Theirs {
    /// Redisson's contenders `CONTENDERS` asks for.
    fn all() -> Vec<Theirs> {
        THEIRS
            .into_iter()
            .filter(|(id, ..)| options::wanted("CONTENDERS", id))
            .map(|(id, api, name, kind)| Theirs {
                id,
                api,
                name,
                kind,
                spent: Spent::default(),
            })
            .collect()
    }

    /// Its row, from its result line of `workload`.
    fn row(self, bench: &mut Bench, workload: &str, fields: &[Field]) -> Row {
        let result = bench.jvm.report(workload, self.api);
        Row::of_jvm(self.id, self.name, self.kind, result, fields, self.spent)
    }
}

/// `rounds` rounds of turns on `workload`: each of the crate's contenders does `work`, then
/// each of Redisson's runs `amount` (W1: pairs; W2, W3: ms); then every row.
#[allow(clippy::too_many_arguments)]
fn in_turns<S: Send + 'static, F: Future<Output = S> + Send + 'static>(
    bench: &mut Bench,
    workload: &str,
    mut ours: Vec<Ours<S>>,
    rounds: usize,
    amount: u64,
    work: impl Fn(S) -> F,
    fields: &[Field],
    values: impl Fn(S, f64) -> (f64, Vec<f64>, Option<(usize, usize)>),
) -> Vec<Row> {
    let mut theirs = Theirs::all();
    bench.warm(workload, &theirs);
    for _ in 0..rounds {
        for ours in &mut ours {
            ours.turn(bench, &work);
        }
        for theirs in &mut theirs {
            bench.turn(&mut theirs.spent, |jvm| {
                jvm.run(workload, theirs.api, amount)
            });
        }
    }
    let mut rows: Vec<Row> = ours.into_iter().map(|ours| ours.row(&values)).collect();
    rows.extend(theirs.into_iter().map(|t| t.row(bench, workload, fields)));
    rows
}

/// A lock + unlock pair of the crate's contender `id` on `key`, made on the current runtime.
async fn pair(id: &'static str, client: Option<Client>, url: &str, key: String) -> Pair {
    match (id, client) {
        ("lock", Some(client)) => Box::new(pair_of(client.lock(key), |lock| {
            Box::pin(async move { lock.lock().await.unwrap().unlock().await.unwrap() })
        })),
        ("fair", Some(client)) => Box::new(pair_of(client.fair_lock(key), |lock| {
            Box::pin(async move { lock.lock().await.unwrap().unlock().await.unwrap() })
        })),
        _ => {
            let floor = RawHash::new(vec![connect(url).await], &key, 1);
            Box::new(move || floor.pair())
        }
    }
}

/// A client for the crate's contender `id` (the floor has none).
async fn client(id: &str, url: &str) -> Option<Client> {
    if id == "floor" {
        return None;
    }
    Some(Client::connect(url).await.unwrap())
}

/// W1's state: the pair, and the time of each pair so far, µs.
type W1 = (Pair, Vec<f64>);

/// `n` more pairs one after the other, each timed.
async fn block((mut pair, mut micros): W1, n: usize) -> W1 {
    for _ in 0..n {
        let began = Instant::now();
        pair().await;
        micros.push(began.elapsed().as_secs_f64() * 1e6);
    }
    (pair, micros)
}

/// W1: one task (Redisson: one thread or async caller), lock + unlock on one key; every
/// contender warmed, then timed pairs in turns of [`BLOCK`].
fn w1(bench: &mut Bench) -> Vec<Row> {
    let (warmup, pairs) = options::pairs();
    let url = bench.url.clone();
    let ours = Ours::all(true, |id, flavour| {
        let (url, key) = (url.clone(), format!("beside:w1:{id}:{}", flavour.id()));
        async move {
            let client = client(id, &url).await;
            let (pair, _) = block((pair(id, client, &url, key).await, Vec::new()), warmup).await;
            (pair, Vec::with_capacity(pairs))
        }
    });
    let rounds = pairs.div_ceil(BLOCK);
    let values = |(_, micros): W1, cpu_us: f64| {
        let n = micros.len() as f64;
        let total_s = micros.iter().sum::<f64>() / 1e6;
        let micros = sorted(micros);
        let values = vec![at(&micros, 0.5), at(&micros, 0.99), n / total_s, cpu_us / n];
        (n, values, None)
    };
    let work = |state| block(state, BLOCK);
    in_turns(
        bench,
        "w1",
        ours,
        rounds,
        BLOCK as u64,
        work,
        &W1_FIELDS,
        values,
    )
}

/// W2's state: the tasks' pairs, each pair's time so far (µs), and the slices' wall time (s).
type W2 = (Vec<Pair>, Vec<f64>, f64);

/// One W2 slice: every task's pairs until `run` is over.
async fn w2_slice((pairs, mut micros, mut elapsed): W2, run: Duration) -> W2 {
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
                (pair, micros)
            })
        })
        .collect();
    let mut pairs = Vec::new();
    for task in tasks {
        let (pair, timed) = task.await.unwrap();
        pairs.push(pair);
        micros.extend(timed);
    }
    elapsed += started.elapsed().as_secs_f64();
    (pairs, micros, elapsed)
}

/// How many slices of [`SLICE`] W2 and W3 give each contender.
fn slices() -> usize {
    (options::contention().as_secs_f64() / SLICE.as_secs_f64()).round() as usize
}

/// W2: 32 tasks of one client (Redisson: 32 threads, or 32 async callers), one key each,
/// lock + unlock; every contender in slices of [`SLICE`], in turns.
fn w2(bench: &mut Bench) -> Vec<Row> {
    let url = bench.url.clone();
    let ours = Ours::all(true, |id, flavour| {
        let url = url.clone();
        async move {
            // One client (the floor: one connection) for the tasks, a key each.
            let client = client(id, &url).await;
            let mut pairs = Vec::new();
            for i in 0..W2_TASKS {
                let key = format!("beside:w2:{id}:{}:{i}", flavour.id());
                pairs.push(pair(id, client.clone(), &url, key).await);
            }
            for _ in 0..W2_WARMUP_ROUNDS {
                futures_util::future::join_all(pairs.iter_mut().map(|pair| pair())).await;
            }
            (pairs, Vec::new(), 0.0)
        }
    });
    let values = |(_, micros, elapsed): W2, cpu_us: f64| {
        let n = micros.len() as f64;
        let micros = sorted(micros);
        let values = vec![n / elapsed, at(&micros, 0.5), at(&micros, 0.99), cpu_us / n];
        (n, values, None)
    };
    let work = |state| w2_slice(state, SLICE);
    let slice_ms = SLICE.as_millis() as u64;
    in_turns(
        bench,
        "w2",
        ours,
        slices(),
        slice_ms,
        work,
        &W2_FIELDS,
        values,
    )
}

/// W3's state: one slice of contention on the contender's lock, and what the slices
/// measured so far.
type W3 = (W3Slice, Contention);

type W3Slice = Box<dyn Fn(Contention) -> Pin<Box<dyn Future<Output = Contention> + Send>> + Send>;

fn w3_slice<T: Taker>(lock: T) -> W3Slice {
    Box::new(move |mut figures| {
        let lock = lock.clone();
        Box::pin(async move {
            contend(lock, SLICE, &mut figures).await;
            figures
        })
    })
}

/// W3: 8 tasks of one client (Redisson: 8 threads, or 8 async callers) on one key: lock,
/// hold 1 ms, unlock; every contender in slices of [`SLICE`], in turns.
fn w3(bench: &mut Bench) -> Vec<Row> {
    let url = bench.url.clone();
    let ours = Ours::all(false, |id, flavour| {
        let (url, key) = (url.clone(), format!("beside:w3:{id}:{}", flavour.id()));
        async move {
            let client = Client::connect(url).await.unwrap();
            let slice = if id == "fair" {
                w3_slice(Single(client.fair_lock(key)))
            } else {
                w3_slice(Single(client.lock(key)))
            };
            (slice, Contention::default())
        }
    });
    let values = |(_, figures): W3, cpu_us: f64| {
        let summary = figures.summary("");
        let [p50, p99, max] = summary.waits_ms();
        let n = summary.acquisitions();
        let values = vec![summary.per_sec, p50, p99, max, cpu_us / n];
        (n, values, Some(summary.per_task()))
    };
    let work = |(slice, figures): W3| async move {
        let figures = slice(figures).await;
        (slice, figures)
    };
    let slice_ms = SLICE.as_millis() as u64;
    in_turns(
        bench,
        "w3",
        ours,
        slices(),
        slice_ms,
        work,
        &W3_FIELDS,
        values,
    )
}

/// A duration in seconds from the environment, or `default`.
fn seconds(name: &str, default: f64) -> Duration {
    let value = std::env::var(name).ok().and_then(|v| v.trim().parse().ok());
    Duration::from_secs_f64(value.unwrap_or(default))
}

fn main() {
    // Before anything is pinned: a build of the driver may use every CPU.
    let jar = driver_jar();
    let (server, pinned) = placement::start(SPLIT);
    let url = server.url();
    let warmup_max = seconds(
        "JIT_WARMUP_MAX_S",
        if options::quick() { 20.0 } else { 120.0 },
    );
    // Started from this pinned thread, the JVM runs on the client's CPU.
    let jvm = Jvm::start(&jar, &url, seconds("JIT_QUIET_S", 2.0), warmup_max);
    let meter = Meter::connect(&url);
    let ready = |name: &str| jvm.ready[name].to_string().replace('"', "");
    println!(
        "Redisson {} on Java {} ({} CPU, GC {}; Redisson's defaults: {} threads, {} Netty threads, a pool of {} connections); pinned: {pinned}; Redis CPU per INFO reading, taken off each turn: {:.1} µs",
        ready("redisson"),
        ready("java"),
        ready("cpus"),
        ready("gc"),
        ready("threads"),
        ready("netty_threads"),
        ready("connection_pool"),
        meter.reading_cost_us()
    );
    let mut bench = Bench {
        url,
        jvm,
        meter,
        pinned,
        warmup_max,
    };
    let ratio = "×crate: the first figure over the crate's RLock's (FairLock's for fair locks) on the current-thread (ct) and multi-thread (mt) runtime";
    if options::wanted("WORKLOADS", "w1") {
        let rows = w1(&mut bench);
        let title =
            format!("W1: one task, lock + unlock on one key, in turns of {BLOCK} pairs; {ratio}");
        beside::print("W1", &title, &W1_FIELDS, &rows, bench.pinned);
    }
    if options::wanted("WORKLOADS", "w2") {
        let rows = w2(&mut bench);
        let title = format!("W2: {W2_TASKS} tasks (threads, async callers) of one client, one key each, lock + unlock, {} slices of {SLICE:?} each; {ratio}", slices());
        beside::print("W2", &title, &W2_FIELDS, &rows, bench.pinned);
    }
    if options::wanted("WORKLOADS", "w3") {
        let rows = w3(&mut bench);
        let title = format!("W3: 8 tasks (threads, async callers) of one client on one key, lock, hold 1 ms, unlock, {} slices of {SLICE:?} each; {ratio}", slices());
        beside::print("W3", &title, &W3_FIELDS, &rows, bench.pinned);
    }
}
