//! The `metrics` feature: what the locks report through the `metrics` facade, read with
//! `metrics-util`'s debugging recorder and rendered by `metrics-exporter-prometheus` (both
//! behind one fan-out recorder), and the example that serves them as Prometheus text,
//! scraped over HTTP.
//!
//! The recorder is global to the process: it is installed once, with the process's first
//! client built right after it (which makes every series at zero), and the tests that read
//! it take turns, each reading what changed since it began. Built with the feature only:
//! `cargo test --features metrics --test metrics` (`.ci/run` runs it).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::layers::FanoutBuilder;
use metrics_util::MetricKind;
use redis_rlock::{Client, LostReason, MultiLock, RedLock};
use testkit::{start_replica_of, RedisGroup, RedisServer};
use tokio::sync::{Mutex, MutexGuard, OnceCell};

const GENEROUS: Duration = Duration::from_secs(10);

/// The buckets the `operations` module docs give for `rlock_acquire_wait_seconds`.
const ACQUIRE_WAIT_BUCKETS: [f64; 14] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];
/// The buckets the `operations` module docs give for `rlock_hold_seconds`.
const HOLD_BUCKETS: [f64; 12] = [
    0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
];

/// Every label value the `operations` module docs list, for the series made at zero.
const KINDS: [&str; 10] = [
    "reentrant",
    "fair",
    "fenced",
    "read",
    "write",
    "redlock",
    "multilock",
    "semaphore",
    "expirable_semaphore",
    "latch",
];
/// The kinds of releases: a lock's own (a group's releases count under its locks' kinds).
const LOCK_KINDS: [&str; 5] = ["reentrant", "fair", "fenced", "read", "write"];
const ACQUIRE_OUTCOMES: [&str; 4] = ["acquired", "timed_out", "failed", "cancelled"];
const RELEASE_OUTCOMES: [&str; 4] = ["freed", "still_held", "lost", "failed"];
const LOST_REASONS: [&str; 5] = [
    "expired",
    "released",
    "connection_lost",
    "quorum_lost",
    "max_hold_reached",
];
const WAKEUP_SOURCES: [&str; 5] = ["message", "reconnect", "heartbeat", "ttl_bound", "deadline"];

/// A series: its name and its labels as `k=v`, sorted.
type Series = (String, Vec<String>);

/// The metrics of one lock, which carry its `class`.
const CLASSED: [&str; 7] = [
    "rlock_acquires_total",
    "rlock_acquire_wait_seconds",
    "rlock_hold_seconds",
    "rlock_releases_total",
    "rlock_locks_lost_total",
    "rlock_held_locks",
    "rlock_waiting_tasks",
];

/// `labels` of the series `name`, sorted, with `class=default` when `name` is one of a
/// lock's metrics and no class is given: every client here but the class tests' has no
/// class rule.
fn labelled(name: &str, labels: &[&str]) -> Vec<String> {
    let mut labels: Vec<String> = labels.iter().map(|l| l.to_string()).collect();
    if CLASSED.contains(&name) && !labels.iter().any(|l| l.starts_with("class=")) {
        labels.push("class=default".to_string());
    }
    labels.sort();
    labels
}

/// The process's one recorder, and what it showed right after the first client was built.
struct Recorded {
    snapshotter: Snapshotter,
    prometheus: PrometheusHandle,
    /// The Prometheus text right after the process's first `Client::connect`.
    at_first_client: String,
    /// Held by the test reading the recorder: one at a time, so that each sees only what
    /// its own locks did.
    turn: Mutex<()>,
}

static RECORDED: OnceCell<Recorded> = OnceCell::const_new();

/// Installs the recorder, once per process, and builds the process's first client.
async fn recorded() -> &'static Recorded {
    RECORDED
        .get_or_init(|| async {
            let debugging = DebuggingRecorder::new();
            let snapshotter = debugging.snapshotter();
            let prometheus = PrometheusBuilder::new()
                .set_buckets_for_metric(
                    Matcher::Full("rlock_acquire_wait_seconds".into()),
                    &ACQUIRE_WAIT_BUCKETS,
                )
                .unwrap()
                .set_buckets_for_metric(Matcher::Full("rlock_hold_seconds".into()), &HOLD_BUCKETS)
                .unwrap()
                .build_recorder();
            let handle = prometheus.handle();
            let fanout = FanoutBuilder::default()
                .add_recorder(debugging)
                .add_recorder(prometheus)
                .build();
            metrics::set_global_recorder(fanout).expect("the only recorder of this test binary");
            let server = RedisServer::start();
            let first = Client::connect(server.url()).await.unwrap();
            let at_first_client = handle.render();
            drop(first);
            Recorded {
                snapshotter,
                prometheus: handle,
                at_first_client,
                turn: Mutex::new(()),
            }
        })
        .await
}

/// What the recorder saw since a test began, added up across snapshots (a snapshot hands
/// over what changed since the one before it).
struct Seen {
    snapshotter: &'static Snapshotter,
    prometheus: &'static PrometheusHandle,
    /// (name, labels as `k=v` sorted) → counter total or gauge level.
    values: HashMap<Series, f64>,
    histograms: HashMap<Series, Vec<f64>>,
    _turn: MutexGuard<'static, ()>,
}

impl Seen {
    /// Waits for this test's turn at the recorder, and from then on adds up what changes.
    async fn begin() -> Seen {
        let recorded = recorded().await;
        let turn = recorded.turn.lock().await;
        // What came before this test is not this test's.
        recorded.snapshotter.snapshot();
        Seen {
            snapshotter: &recorded.snapshotter,
            prometheus: &recorded.prometheus,
            values: HashMap::new(),
            histograms: HashMap::new(),
            _turn: turn,
        }
    }

    /// The recorder's Prometheus text now (counts since the process started).
    fn prometheus_text(&self) -> String {
        self.prometheus.render()
    }

    fn update(&mut self) {
        for (key, _, _, value) in self.snapshotter.snapshot().into_vec() {
            let mut labels: Vec<String> = key
                .key()
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            labels.sort();
            let id = (key.key().name().to_string(), labels);
            match (key.kind(), value) {
                (MetricKind::Counter, DebugValue::Counter(n)) => {
                    *self.values.entry(id).or_default() += n as f64;
                }
                (MetricKind::Gauge, DebugValue::Gauge(g)) => {
                    *self.values.entry(id).or_default() += g.into_inner();
                }
                (MetricKind::Histogram, DebugValue::Histogram(values)) => self
                    .histograms
                    .entry(id)
                    .or_default()
                    .extend(values.into_iter().map(|v| v.into_inner())),
                _ => {}
            }
        }
    }

    /// A counter's total or a gauge's level; `labels` as `k=v`, in any order.
    fn value(&mut self, name: &str, labels: &[&str]) -> f64 {
        self.update();
        let labels = labelled(name, labels);
        self.values
            .get(&(name.to_string(), labels))
            .copied()
            .unwrap_or(0.0)
    }

    fn histogram(&mut self, name: &str, labels: &[&str]) -> Vec<f64> {
        self.update();
        let labels = labelled(name, labels);
        self.histograms
            .get(&(name.to_string(), labels))
            .cloned()
            .unwrap_or_default()
    }

    /// Waits until `name{labels}` reads `expected`; panics with the last reading.
    async fn becomes(&mut self, name: &str, labels: &[&str], expected: f64) {
        let end = Instant::now() + GENEROUS;
        loop {
            let now = self.value(name, labels);
            if now == expected {
                return;
            }
            assert!(
                Instant::now() < end,
                "{name}{labels:?} is {now}, expected {expected}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// The series of a Prometheus text and their values; labels as `k=v`, sorted.
fn series_in(text: &str) -> HashMap<Series, f64> {
    let mut series = HashMap::new();
    for line in text.lines().filter(|line| !line.starts_with('#')) {
        let Some((id, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let (name, labels) = match id.split_once('{') {
            Some((name, labels)) => (name, labels.trim_end_matches('}')),
            None => (id, ""),
        };
        let mut labels: Vec<String> = labels
            .split(',')
            .filter(|label| !label.is_empty())
            .map(|label| label.replace('"', ""))
            .collect();
        labels.sort();
        series.insert(
            (name.to_string(), labels),
            value.parse().unwrap_or(f64::NAN),
        );
    }
    series
}

mod classes;
mod example;
mod monitoring;
mod series;
mod walk;
