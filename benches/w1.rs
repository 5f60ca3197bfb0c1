//! W1: one task, lock + unlock on one key, each pair timed: the raw hash-script floor, the
//! raw SET NX floor, rslock 0.10, `RLock` (watchdog and 30 s lease) and `FairLock`, taking
//! turns a block of pairs each; in both placements (server on CPU 1 and client on CPU 0,
//! then both on CPU 0) and on every runtime flavour (current-thread; multi-thread in
//! `block_on`, as a `#[tokio::main]` body; multi-thread in a spawned task), each beside the
//! floor measured on that same flavour and placement. Each contender runs on a runtime of
//! its own (see `common/interleave.rs`).
//!
//! `cargo bench --bench w1`. Besides `QUICK`, `PAIRS`, `WARMUP` (see `common/options.rs`):
//! `CONTENDERS=floor,lock`, `FLAVOURS=multi_thread`, `PLACEMENTS=same_cpu` pick what runs;
//! `PLACEMENTS=none` runs once without moving anything (for `benches/callgrind.sh`).
//! Built with `--features metrics`, `PROMETHEUS=1` installs a Prometheus recorder (the
//! buckets of `examples/metrics.rs`) before anything runs, so that the library's metrics
//! cost what they cost in a service that scrapes them; compare each contender's ratio to
//! the floor, which emits no metrics, with a run without it.
//!
//! Per contender, beside p50/p99 and pairs/s: client CPU per pair (every thread of the
//! process), context switches per pair (every thread of the process) and runtime worker
//! wake-ups per pair, which show the hand-offs between threads a pair costs.

use testkit as support;

mod common;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use redis_rlock::Client;
use rslock::LockManager;

use common::floor::{connect, RawHash, RawSetNx};
use common::interleave::{interleaved, pair_of, place, Contender, BLOCK};
use common::options;
use common::placement::{self, Placement, PLACEMENTS};
use common::report::{fixed, Json, Table};
use common::runtime::Flavour;
use common::stats::Figures;

async fn floor(url: String) -> Contender {
    let floor = RawHash::new(vec![connect(&url).await], "w1:raw", 1);
    Contender::new("floor", "raw hash-script floor", move || floor.pair())
}

async fn set_nx(url: String) -> Contender {
    let floor = RawSetNx::new(connect(&url).await, "w1:setnx");
    Contender::new("setnx", "raw SET NX floor", move || floor.pair())
}

async fn rslock(url: String) -> Contender {
    let manager = LockManager::new(vec![url]);
    let pair = pair_of(manager, |manager| {
        Box::pin(async move {
            let lock = manager
                .lock(b"w1:rslock", Duration::from_secs(30))
                .await
                .expect("rslock takes an uncontended key");
            manager.unlock(&lock).await;
        })
    });
    Contender::new("rslock", "rslock 0.10", pair)
}

async fn lock(url: String) -> Contender {
    let lock = Client::connect(url).await.unwrap().lock("w1:lib");
    let pair = pair_of(lock, |lock| {
        Box::pin(async move { lock.lock().await.unwrap().unlock().await.unwrap() })
    });
    Contender::new("lock", "RLock lock() (watchdog)", pair)
}

async fn lease(url: String) -> Contender {
    let lock = Client::connect(url).await.unwrap().lock("w1:lease");
    let pair = pair_of(lock, |lock| {
        Box::pin(async move {
            let guard = lock.lock_with_lease(Duration::from_secs(30)).await;
            guard.unwrap().unlock().await.unwrap()
        })
    });
    Contender::new("lease", "RLock lock_with_lease(30 s)", pair)
}

async fn fair(url: String) -> Contender {
    let lock = Client::connect(url).await.unwrap().fair_lock("w1:fair");
    let pair = pair_of(lock, |lock| {
        Box::pin(async move { lock.lock().await.unwrap().unlock().await.unwrap() })
    });
    Contender::new("fair", "FairLock lock() (watchdog)", pair)
}

/// Makes a contender on the current runtime.
type Make = fn(String) -> Pin<Box<dyn Future<Output = Contender> + Send>>;

/// The contenders, in the order they take turns.
const CONTENDERS: [(&str, Make); 6] = [
    ("floor", |url| Box::pin(floor(url))),
    ("setnx", |url| Box::pin(set_nx(url))),
    ("rslock", |url| Box::pin(rslock(url))),
    ("lock", |url| Box::pin(lock(url))),
    ("lease", |url| Box::pin(lease(url))),
    ("fair", |url| Box::pin(fair(url))),
];

/// W1 on `flavour`: each contender `CONTENDERS` asks for on a fresh runtime of its own.
fn measure(url: &str, flavour: Flavour, warmup: usize, pairs: usize) -> Vec<Figures> {
    let placed = CONTENDERS
        .iter()
        .filter(|(id, _)| options::wanted("CONTENDERS", id))
        .map(|(_, make)| place(flavour, make(url.to_string())))
        .collect();
    interleaved(flavour, placed, warmup, pairs)
}

/// What one (placement, flavour) measured, for the JSON lines, the tables and the summary.
struct Run {
    placement: &'static str,
    described: &'static str,
    pinned: bool,
    flavour: Flavour,
    figures: Vec<Figures>,
}

impl Run {
    /// The floor's p50: the first contender's, or 1 when the floor was left out.
    fn floor(&self) -> f64 {
        self.figures
            .iter()
            .find(|f| f.id == "floor")
            .map_or(1.0, |f| f.percentile(0.5))
    }

    fn print_json(&self) {
        let floor = self.floor();
        for figures in &self.figures {
            Json::new("W1")
                .str("placement", self.placement)
                .str("flavour", self.flavour.id())
                .raw("workers", self.flavour.worker_threads())
                .str("contender", figures.name)
                .str("contender_id", figures.id)
                .raw("pairs", figures.micros.len())
                .num("p50_us", figures.percentile(0.5), 1)
                .num("p99_us", figures.percentile(0.99), 1)
                .num("ops_per_s", figures.ops_per_sec(), 0)
                .num("ratio_p50_to_floor", figures.percentile(0.5) / floor, 3)
                .num("client_cpu_us_per_pair", figures.cpu_per_pair(), 1)
                .num("context_switches_per_pair", figures.switches_per_pair(), 2)
                .num("worker_unparks_per_pair", figures.unparks_per_pair(), 2)
                .raw("pinned", self.pinned)
                .print();
        }
    }

    fn print_table(&self, warmup: usize) {
        let pairs = self.figures.first().map_or(0, |f| f.micros.len());
        let title = format!(
            "W1: 1 task, lock + unlock on one key ({pairs} pairs each after {warmup} warm-up, in turns of {BLOCK}; {}; {}; pinned: {})",
            self.described,
            self.flavour.described(),
            self.pinned
        );
        let table = Table::new(
            &title,
            &[
                ("contender", 30),
                ("p50 µs", 9),
                ("p99 µs", 9),
                ("pairs/s", 10),
                ("×floor", 8),
                ("client CPU µs", 14),
                ("ctx sw/pair", 12),
                ("unparks/pair", 13),
            ],
        );
        let floor = self.floor();
        for f in &self.figures {
            table.row(&[
                f.name.to_string(),
                fixed(f.percentile(0.5), 1),
                fixed(f.percentile(0.99), 1),
                fixed(f.ops_per_sec(), 0),
                fixed(f.percentile(0.5) / floor, 2),
                fixed(f.cpu_per_pair(), 1),
                fixed(f.switches_per_pair(), 2),
                fixed(f.unparks_per_pair(), 2),
            ]);
        }
    }
}

/// Every contender's p50 as a ratio to the floor's, one column per placement and flavour.
fn print_summary(runs: &[Run]) {
    let Some(first) = runs.first() else {
        return;
    };
    let mut columns = vec![("p50 ×floor", 30)];
    let headers: Vec<String> = runs
        .iter()
        .map(|run| format!("{}/{}", run.placement, run.flavour.id()))
        .collect();
    columns.extend(headers.iter().map(|h| (h.as_str(), h.len().max(8))));
    let table = Table::new(
        "W1 summary: p50 as a ratio to the raw hash-script floor's, by placement/flavour",
        &columns,
    );
    let floor_row: Vec<String> = std::iter::once("raw hash-script floor p50 µs".to_string())
        .chain(runs.iter().map(|run| fixed(run.floor(), 1)))
        .collect();
    table.row(&floor_row);
    for (i, figures) in first.figures.iter().enumerate() {
        let mut cells = vec![figures.name.to_string()];
        cells.extend(
            runs.iter()
                .map(|run| fixed(run.figures[i].percentile(0.5) / run.floor(), 2)),
        );
        table.row(&cells);
    }
}

/// The placements `PLACEMENTS` asks for; `none` for one run where things are.
fn placements() -> Vec<Option<Placement>> {
    if std::env::var("PLACEMENTS").is_ok_and(|p| p.trim() == "none") {
        return vec![None];
    }
    PLACEMENTS
        .into_iter()
        .filter(|p| options::wanted("PLACEMENTS", p.id))
        .map(Some)
        .collect()
}

/// Installs a Prometheus recorder when `PROMETHEUS` is set, with the example's histogram
/// buckets, and drains its histograms every 5 s as the exporter's HTTP listener would.
#[cfg(feature = "metrics")]
fn install_recorder() {
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
    if std::env::var_os("PROMETHEUS").is_none() {
        return;
    }
    let edges = [
        0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0,
    ];
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Prefix("rlock_".into()), &edges)
        .and_then(|builder| builder.install_recorder())
        .expect("a Prometheus recorder installs once, first");
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_secs(5));
        handle.run_upkeep();
    });
    eprintln!("W1: a Prometheus recorder is installed");
}

#[cfg(not(feature = "metrics"))]
fn install_recorder() {
    assert!(
        std::env::var_os("PROMETHEUS").is_none(),
        "PROMETHEUS needs the bench built with --features metrics"
    );
}

fn main() {
    install_recorder();
    let (warmup, pairs) = options::pairs();
    let server = support::RedisServer::start();
    let client_pinned = placements().iter().any(Option::is_some)
        && placement::pin_this_thread(placement::CLIENT_CPU);
    let mut runs = Vec::new();
    for placement in placements() {
        let pinned = placement.is_some_and(|p| placement::pin_server(&server, p.server_cpu));
        let (id, described) = placement.map_or(("unpinned", "not pinned"), |p| (p.id, p.described));
        for flavour in Flavour::ALL {
            if !options::wanted("FLAVOURS", flavour.id()) {
                continue;
            }
            let run = Run {
                placement: id,
                described,
                pinned: pinned && client_pinned,
                flavour,
                figures: measure(&server.url(), flavour, warmup, pairs),
            };
            run.print_json();
            run.print_table(warmup);
            runs.push(run);
        }
    }
    print_summary(&runs);
}
