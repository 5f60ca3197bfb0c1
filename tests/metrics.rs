//! The `metrics` feature: what the locks report through the `metrics` facade, read with
//! `metrics-util`'s debugging recorder, and the example that serves them as Prometheus
//! text, scraped over HTTP.
//!
//! The recorder is global to the process, so one test walks through every scenario in
//! turn, each reading what changed since the last. Built with the feature only:
//! `cargo test --features metrics --test metrics` (`.ci/run` runs it).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::MetricKind;
use redis_rlock::{Client, LostReason, RedLock};
use testkit::{start_replica_of, RedisGroup, RedisServer};

const GENEROUS: Duration = Duration::from_secs(10);

/// What the recorder saw, added up across snapshots (a snapshot hands over what changed
/// since the one before it).
struct Seen {
    snapshotter: Snapshotter,
    /// (name, labels as `k=v` sorted) → counter total or gauge level.
    values: HashMap<(String, Vec<String>), f64>,
    histograms: HashMap<(String, Vec<String>), Vec<f64>>,
}

impl Seen {
    fn install() -> Seen {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("the only recorder of this test binary");
        Seen {
            snapshotter,
            values: HashMap::new(),
            histograms: HashMap::new(),
        }
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
    let mut seen = Seen::install();
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
}

/// `examples/metrics.rs` serves the metrics as Prometheus text: scraped over HTTP while its
/// workers run, it shows the acquires, the releases and the held-locks gauge.
#[test]
fn the_example_serves_prometheus_text() {
    let mut child = Command::new(example_binary("metrics"))
        .args(["--start", "--seconds", "5"])
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
    ];
    let text = settles_to_text(&address, &wanted);
    for line in wanted {
        assert!(text.contains(line), "no `{line}` in:\n{text}");
    }
    assert!(!text.contains("metrics:example"), "a lock name in:\n{text}");
    let status = child.wait().expect("the example ends");
    assert!(status.success(), "{status}");
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
