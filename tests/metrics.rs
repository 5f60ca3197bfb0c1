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
        let mut labels: Vec<String> = labels.iter().map(|l| l.to_string()).collect();
        labels.sort();
        self.values
            .get(&(name.to_string(), labels))
            .copied()
            .unwrap_or(0.0)
    }

    fn histogram(&mut self, name: &str, labels: &[&str]) -> Vec<f64> {
        self.update();
        let mut labels: Vec<String> = labels.iter().map(|l| l.to_string()).collect();
        labels.sort();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_follow_what_the_locks_do() {
    let mut seen = Seen::begin().await;
    let server = RedisServer::start();
    let a = testkit::client_with_watchdog(&server, Duration::from_millis(900)).await;
    // A short watchdog for b too: its renewal finds the lock gone within 300 ms of the force
    // unlock below (with the default 30 s lease, not within the test's 10 s bound).
    let b = testkit::client_with_watchdog(&server, Duration::from_millis(900)).await;
    let reentrant = ["kind=reentrant"];

    // An acquire and its release; the hold is counted while it lasts.
    let guard = a.lock("m:one").lock().await.unwrap();
    assert_eq!(seen.value("rlock_held_locks", &[]), 1.0);
    assert_eq!(
        seen.value(
            "rlock_acquires_total",
            &["kind=reentrant", "outcome=acquired"]
        ),
        1.0
    );
    let waits = seen.histogram(
        "rlock_acquire_wait_seconds",
        &["kind=reentrant", "outcome=acquired"],
    );
    assert_eq!(waits.len(), 1);
    assert!(waits[0] < 1.0, "{waits:?}");
    // The watchdog renews it (every 300 ms here).
    let renewed = ["outcome=renewed"];
    let end = Instant::now() + GENEROUS;
    while seen.value("rlock_renewals_total", &renewed) < 2.0 {
        assert!(Instant::now() < end, "no renewals counted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    guard.unlock().await.unwrap();
    assert_eq!(seen.value("rlock_held_locks", &[]), 0.0);
    assert_eq!(
        seen.value("rlock_releases_total", &["kind=reentrant", "outcome=freed"]),
        1.0
    );
    let holds = seen.histogram("rlock_hold_seconds", &reentrant);
    assert_eq!(holds.len(), 1);
    assert!(holds[0] >= 0.6, "held through two renewals: {holds:?}");

    // Busy: a try that finds it held, and a bounded wait that runs out.
    let held = a.lock("m:busy").lock().await.unwrap();
    assert!(b.lock("m:busy").try_lock().await.unwrap().is_none());
    let started = Instant::now();
    assert!(b
        .lock("m:busy")
        .try_lock_for(Duration::from_millis(300))
        .await
        .unwrap()
        .is_none());
    let timed_out = ["kind=reentrant", "outcome=timed_out"];
    assert_eq!(seen.value("rlock_acquires_total", &timed_out), 2.0);
    let waits = seen.histogram("rlock_acquire_wait_seconds", &timed_out);
    assert!(
        waits
            .iter()
            .any(|&w| w >= 0.29 && w <= started.elapsed().as_secs_f64()),
        "{waits:?}"
    );

    // A waiter: counted while it waits, on one subscribed channel, woken by the message.
    let waiter = {
        let lock = b.lock("m:busy");
        tokio::spawn(async move { lock.lock().await.unwrap() })
    };
    seen.becomes("rlock_waiting_tasks", &[], 1.0).await;
    seen.becomes("rlock_subscribed_channels", &[], 1.0).await;
    let messages_before = seen.value("rlock_wakeups_total", &["source=message"]);
    // Its subscription drops and comes back: a resubscription, and the waiter re-checks.
    server.cli(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    seen.becomes("rlock_resubscriptions_total", &[], 1.0).await;
    assert!(seen.value("rlock_wakeups_total", &["source=reconnect"]) >= 1.0);
    held.unlock().await.unwrap();
    let got = tokio::time::timeout(GENEROUS, waiter)
        .await
        .unwrap()
        .unwrap();
    assert!(seen.value("rlock_wakeups_total", &["source=message"]) > messages_before);
    seen.becomes("rlock_waiting_tasks", &[], 0.0).await;
    seen.becomes("rlock_subscribed_channels", &[], 0.0).await;

    // Lost: the lock is deleted under its holder, whose watchdog finds the field gone.
    assert!(a.lock("m:busy").force_unlock().await.unwrap());
    let reason = tokio::time::timeout(GENEROUS, got.lost()).await.unwrap();
    assert_eq!(reason, LostReason::Released);
    seen.becomes("rlock_locks_lost_total", &["reason=released"], 1.0)
        .await;
    assert!(seen.value("rlock_renewals_total", &["outcome=not_held"]) >= 1.0);
    assert_eq!(
        seen.value("rlock_held_locks", &[]),
        0.0,
        "a lost hold is not held"
    );
    assert!(got.unlock().await.unwrap_err().is_lock_lost());
    assert_eq!(
        seen.value("rlock_releases_total", &["kind=reentrant", "outcome=lost"]),
        1.0
    );

    // A wait whose caller gives up: cancelled.
    let blocker = a.lock("m:cancel").lock().await.unwrap();
    let lock = b.lock("m:cancel");
    assert!(
        tokio::time::timeout(Duration::from_millis(200), lock.lock())
            .await
            .is_err()
    );
    assert_eq!(
        seen.value(
            "rlock_acquires_total",
            &["kind=reentrant", "outcome=cancelled"]
        ),
        1.0
    );
    blocker.unlock().await.unwrap();

    // Other kinds carry their own label.
    a.fair_lock("m:fair")
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    assert_eq!(
        seen.value("rlock_acquires_total", &["kind=fair", "outcome=acquired"]),
        1.0
    );
    let pool = a.semaphore("m:pool");
    assert!(pool.try_set_permits(1).await.unwrap());
    pool.acquire(1).await.unwrap().release().await.unwrap();
    assert_eq!(
        seen.value(
            "rlock_acquires_total",
            &["kind=semaphore", "outcome=acquired"]
        ),
        1.0
    );
    let group = RedisGroup::start(3);
    let mut clients = Vec::new();
    for url in group.urls() {
        clients.push(Client::connect(url).await.unwrap());
    }
    let redlock = RedLock::new(clients.iter().map(|c| c.lock("m:red")).collect());
    redlock.lock().await.unwrap().unlock().await.unwrap();
    assert_eq!(
        seen.value(
            "rlock_acquires_total",
            &["kind=redlock", "outcome=acquired"]
        ),
        1.0
    );

    // Replica sync: an acquire's WAIT acknowledged by a live replica.
    let master = RedisServer::start();
    let _replica = start_replica_of(&master).await;
    let synced = Client::builder(master.url())
        .replica_sync(1, Duration::from_millis(500))
        .build()
        .await
        .unwrap();
    synced
        .lock("m:sync")
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    assert!(seen.value("rlock_replica_sync_total", &["outcome=acknowledged"]) >= 1.0);

    // Every bounded label: no metric ever names a lock.
    seen.update();
    for (name, labels) in seen.values.keys().chain(seen.histograms.keys()) {
        for label in labels {
            assert!(!label.contains("m:"), "{name} names a lock: {label}");
        }
    }

    // Every counter and gauge series this walk moved was there, at zero, before it.
    let at_zero = series_in(&recorded().await.at_first_client);
    for series in seen.values.keys() {
        assert_eq!(
            at_zero.get(series),
            Some(&0.0),
            "{series:?} was not made at zero"
        );
    }
}

/// Right after the process's first `Client::connect`, every counter and gauge is there at
/// zero, for every label value the crate can emit: an alert on
/// `increase(rlock_locks_lost_total[5m]) > 0` sees a process's first lost lock. A later
/// client leaves what was counted as it is.
#[tokio::test]
async fn every_series_exists_at_zero_from_the_first_client() {
    let seen = Seen::begin().await;
    let at_zero = series_in(&recorded().await.at_first_client);
    let mut expected: Vec<(&str, Vec<String>)> = Vec::new();
    for kind in KINDS {
        for outcome in ACQUIRE_OUTCOMES {
            expected.push((
                "rlock_acquires_total",
                vec![format!("kind={kind}"), format!("outcome={outcome}")],
            ));
        }
    }
    for kind in LOCK_KINDS {
        for outcome in RELEASE_OUTCOMES {
            expected.push((
                "rlock_releases_total",
                vec![format!("kind={kind}"), format!("outcome={outcome}")],
            ));
        }
    }
    for outcome in ["renewed", "not_held"] {
        expected.push(("rlock_renewals_total", vec![format!("outcome={outcome}")]));
    }
    for reason in LOST_REASONS {
        expected.push(("rlock_locks_lost_total", vec![format!("reason={reason}")]));
    }
    for source in WAKEUP_SOURCES {
        expected.push(("rlock_wakeups_total", vec![format!("source={source}")]));
    }
    for outcome in ["acknowledged", "not_acknowledged", "failed"] {
        expected.push((
            "rlock_replica_sync_total",
            vec![format!("outcome={outcome}")],
        ));
    }
    for name in [
        "rlock_renewal_failures_total",
        "rlock_resubscriptions_total",
        "rlock_held_locks",
        "rlock_waiting_tasks",
        "rlock_subscribed_channels",
    ] {
        expected.push((name, Vec::new()));
    }
    for (name, mut labels) in expected {
        labels.sort();
        let series = (name.to_string(), labels);
        assert_eq!(
            at_zero.get(&series),
            Some(&0.0),
            "{series:?} not at zero after the first connect:\n{}",
            recorded().await.at_first_client
        );
    }

    // A second client of the process resets nothing.
    let server = RedisServer::start();
    let a = testkit::client(&server).await;
    a.lock("z:one")
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    let acquired = (
        "rlock_acquires_total".to_string(),
        vec!["kind=reentrant".to_string(), "outcome=acquired".to_string()],
    );
    let before = series_in(&seen.prometheus_text())[&acquired];
    assert!(before >= 1.0, "{before}");
    let _b = testkit::client(&server).await;
    assert_eq!(series_in(&seen.prometheus_text())[&acquired], before);
}

/// With the buckets the `operations` docs give, both histograms render as Prometheus
/// histograms (`_bucket{le=...}` lines), which `histogram_quantile` aggregates across
/// replicas, rather than as the exporter's default summaries.
#[tokio::test]
async fn the_documented_buckets_make_histograms() {
    let seen = Seen::begin().await;
    let server = RedisServer::start();
    let a = testkit::client(&server).await;
    let guard = a.lock("h:one").lock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    guard.unlock().await.unwrap();
    let text = seen.prometheus_text();
    for line in [
        "# TYPE rlock_acquire_wait_seconds histogram",
        "rlock_acquire_wait_seconds_bucket{kind=\"reentrant\",outcome=\"acquired\",le=\"5\"}",
        "rlock_acquire_wait_seconds_bucket{kind=\"reentrant\",outcome=\"acquired\",le=\"+Inf\"}",
        "# TYPE rlock_hold_seconds histogram",
        "rlock_hold_seconds_bucket{kind=\"reentrant\",le=\"30\"}",
        "rlock_hold_seconds_bucket{kind=\"reentrant\",le=\"+Inf\"}",
    ] {
        assert!(text.contains(line), "no `{line}` in:\n{text}");
    }
    assert!(!text.contains("quantile="), "a summary in:\n{text}");
}

/// A `try_lock_for` that runs out on a held lock (a single lock's, or a lock group's)
/// counts a `deadline` wake-up, not a `ttl_bound` one; a wait that re-checks when the holder's short fixed lease runs out (no
/// unlock message) counts `ttl_bound`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_deadline_is_no_ttl_bound_wakeup() {
    let mut seen = Seen::begin().await;
    let server = RedisServer::start();
    let a = testkit::client(&server).await;
    let b = testkit::client(&server).await;
    let deadline = ["source=deadline"];
    let ttl_bound = ["source=ttl_bound"];

    let held = a.lock("w:deadline").lock().await.unwrap();
    let waiter = b.lock("w:deadline");
    let wait = waiter.try_lock_for(Duration::from_millis(300)).await;
    assert!(wait.unwrap().is_none());
    assert_eq!(seen.value("rlock_wakeups_total", &deadline), 1.0);
    assert_eq!(seen.value("rlock_wakeups_total", &ttl_bound), 0.0);
    // A lock group's wait that runs out counts the caller's deadline too.
    let group = MultiLock::new(vec![b.lock("w:deadline"), b.lock("w:free")]);
    let wait = group.try_lock_for(Duration::from_millis(300)).await;
    assert!(wait.unwrap().is_none());
    assert_eq!(seen.value("rlock_wakeups_total", &deadline), 2.0);
    assert_eq!(seen.value("rlock_wakeups_total", &ttl_bound), 0.0);
    held.unlock().await.unwrap();

    // Held with a fixed lease and never released: the waiter hears nothing, and re-checks
    // when the lease runs out.
    let expiring = a
        .lock("w:ttl")
        .lock_with_lease(Duration::from_millis(300))
        .await
        .unwrap();
    let got = b
        .lock("w:ttl")
        .try_lock_for(GENEROUS)
        .await
        .unwrap()
        .expect("taken once the lease ran out");
    assert!(seen.value("rlock_wakeups_total", &ttl_bound) >= 1.0);
    assert_eq!(seen.value("rlock_wakeups_total", &deadline), 2.0);
    assert_eq!(seen.value("rlock_wakeups_total", &["source=message"]), 0.0);
    got.unlock().await.unwrap();
    assert!(expiring.unlock().await.is_err(), "its lease ran out");
}

/// `examples/metrics.rs` serves the metrics as Prometheus text: scraped over HTTP while its
/// workers run, it shows the acquires, the releases and the held-locks gauge.
#[test]
fn the_example_serves_prometheus_text() {
    let mut child = Command::new(example_binary("metrics"))
        .args(["--seconds", "5"])
        .env_remove("REDIS_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run the metrics example");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().expect("a first line").unwrap();
    let address = first
        .strip_prefix("serving http://")
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("unexpected first line: {first}"))
        .to_string();
    assert!(address.starts_with("127.0.0.1:"), "{address}");

    let wanted = [
        "# TYPE rlock_acquires_total counter",
        "rlock_acquires_total{kind=\"reentrant\",outcome=\"acquired\"}",
        "rlock_releases_total{kind=\"reentrant\",outcome=\"freed\"}",
        "rlock_acquire_wait_seconds",
        "rlock_hold_seconds",
        "rlock_held_locks",
        // The documented buckets: histograms, not summaries.
        "rlock_acquire_wait_seconds_bucket{kind=\"reentrant\",outcome=\"acquired\",le=\"5\"}",
        "rlock_hold_seconds_bucket{kind=\"reentrant\",le=\"30\"}",
        // Made at zero, and the workers' own deadlines counted apart.
        "rlock_locks_lost_total{reason=\"expired\"} 0",
        "rlock_wakeups_total{source=\"deadline\"}",
    ];
    let text = settles_to_text(&address, &wanted);
    for line in wanted {
        assert!(text.contains(line), "no `{line}` in:\n{text}");
    }
    assert!(!text.contains("metrics:example"), "a lock name in:\n{text}");
    let status = child.wait().expect("the example ends");
    assert!(status.success(), "{status}");
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

/// Scrapes `/metrics` until it shows every `wanted` line (within [`GENEROUS`]).
fn settles_to_text(address: &str, wanted: &[&str]) -> String {
    let end = Instant::now() + GENEROUS;
    loop {
        let text = scrape(address).unwrap_or_default();
        if wanted.iter().all(|w| text.contains(w)) || Instant::now() > end {
            return text;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn scrape(address: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    Ok(response)
}

/// `target/<profile>/examples/NAME`, next to this test's `target/<profile>/deps/`:
/// `cargo test --features metrics` builds the example too.
fn example_binary(name: &str) -> PathBuf {
    let test_binary = std::env::current_exe().expect("path of the test binary");
    let profile_dir = test_binary
        .parent()
        .and_then(Path::parent)
        .expect("the test binary lives in target/<profile>/deps");
    let binary = profile_dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        binary.is_file(),
        "no example binary at {}: `cargo test --features metrics` builds it (with `--test \
         metrics` alone it does not: run `cargo build --features metrics --example {name}`)",
        binary.display()
    );
    binary
}
