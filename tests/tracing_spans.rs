//! Traces: one span per public operation (`acquire` with its wait, `unlock`, and the
//! watchdog's `renewal_round`), with the lock's name and kind; `WARN` only for what an
//! operator must act on: a quiet run of acquires, waits, renewals and unlocks logs no
//! warning, and a lost lock logs one; a long registered wait warns once, a `RedLock`'s too.
//!
//! Alone in its test binary: tracing caches, per call site, whether anyone listens, and a
//! test on another thread hitting a call site first can make the subscriber this test
//! installs miss it.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis_rlock::{Client, LostReason, RedLock};
use testkit::{RedisGroup, RedisServer};
use tracing_subscriber::fmt::format::FmtSpan;

/// Where the test's log lines go.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `work` on a current-thread runtime with `subscriber` installed for this thread:
/// everything it logs, background tasks included, reaches the subscriber.
fn logged<S>(subscriber: S, work: impl std::future::Future<Output = ()>)
where
    S: tracing::Subscriber + Send + Sync + 'static,
{
    tracing::subscriber::with_default(subscriber, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(work);
    });
}

/// One test at a time: each installs its subscriber for its own thread only.
static ALONE: Mutex<()> = Mutex::new(());

/// A subscriber of `WARN` and above, and what it wrote.
fn warnings() -> (Captured, impl tracing::Subscriber + Send + Sync + 'static) {
    let captured = Captured::default();
    let sink = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || sink.clone())
        .finish();
    (captured, subscriber)
}

/// Checks that `text` holds one `WARN`, the long-wait warning for `lock`, naming `holder`
/// and no deadlock.
fn one_long_wait_warning(text: &str, lock: &str, holder: &str) {
    let warned: Vec<&str> = text.lines().filter(|l| l.contains(" WARN ")).collect();
    assert_eq!(warned.len(), 1, "{text}");
    assert!(warned[0].contains("still waiting for a lock"), "{text}");
    assert!(warned[0].contains(&format!("lock={lock} ")), "{text}");
    assert!(warned[0].contains(holder), "names the holder: {text}");
    assert!(warned[0].contains("deadlock=\"none found\""), "{text}");
}

#[test]
fn operations_have_spans_and_only_a_lost_lock_warns() {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let server = RedisServer::start();
    let captured = Captured::default();
    let sink = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_span_events(FmtSpan::CLOSE)
        .with_writer(move || sink.clone())
        .finish();
    logged(subscriber, async {
        let client = Client::builder(server.url())
            .watchdog_timeout(Duration::from_millis(300))
            .build()
            .await
            .unwrap();
        let guard = client.lock("order:1").lock().await.unwrap();
        let waiter = client.lock("order:1");
        let waiting = tokio::spawn(async move { waiter.lock().await.unwrap() });
        // Two renewal rounds (every 100 ms) while the waiter waits.
        tokio::time::sleep(Duration::from_millis(250)).await;
        guard.unlock().await.unwrap();
        let second = waiting.await.unwrap();
        second.unlock().await.unwrap();
        let fair = client.fair_lock("order:2").lock().await.unwrap();
        fair.unlock().await.unwrap();
        assert!(
            !captured.text().contains(" WARN "),
            "a warning in a quiet run:\n{}",
            captured.text()
        );

        // Lost: deleted under its holder; the watchdog finds out and warns, once.
        let held = client.lock("order:3").lock().await.unwrap();
        server.cli(&["DEL", "order:3"]);
        let reason = tokio::time::timeout(Duration::from_secs(5), held.lost())
            .await
            .unwrap();
        assert_eq!(reason, LostReason::Released);
        drop(held);
        let before_outage = captured.text().len();

        // An outage of 2.2 s while a client with a 3 s watchdog holds a lock: its
        // renewals fail about three times (every 500 ms after the first, at 1 s) and the
        // lock survives. One WARN says Redis is out of reach, one INFO that it is back,
        // and the repeats are DEBUG.
        let steady = Client::builder(server.url())
            .watchdog_timeout(Duration::from_secs(3))
            .build()
            .await
            .unwrap();
        let held = steady.lock("order:4").lock().await.unwrap();
        let frozen = server.pid().to_string();
        let signal = |sig: &str| {
            std::process::Command::new("kill")
                .args([sig, &frozen])
                .status()
                .unwrap()
        };
        signal("-STOP");
        tokio::time::sleep(Duration::from_millis(2200)).await;
        signal("-CONT");
        held.unlock().await.unwrap();
        let outage = captured.text()[before_outage..].to_string();
        let lines = |level: &str, what: &str| {
            outage
                .lines()
                .filter(|l| l.contains(level) && l.contains(what))
                .count()
        };
        assert_eq!(lines(" WARN ", "cannot reach Redis"), 1, "{outage}");
        assert!(
            lines(" DEBUG ", "still cannot reach Redis") >= 1,
            "{outage}"
        );
        assert_eq!(lines(" INFO ", "reachable again"), 1, "{outage}");
        assert_eq!(lines(" WARN ", ""), 1, "nothing else warns:\n{outage}");
    });
    let text = captured.text();
    let closed = |span: &str| {
        text.lines()
            .filter(|line| line.contains(&format!("{span}{{")) && line.contains("close"))
            .count()
    };
    assert!(closed("acquire") >= 4, "acquire spans:\n{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("acquire{") && l.contains("lock=order:1 kind=\"reentrant\"")),
        "the acquire span names the lock and its kind:\n{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("acquire{") && l.contains("lock=order:2 kind=\"fair\"")),
        "{text}"
    );
    assert!(closed("unlock") >= 3, "unlock spans:\n{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("unlock{lock=order:1 kind=\"reentrant\"")),
        "{text}"
    );
    assert!(closed("renewal_round") >= 2, "renewal rounds:\n{text}");
    let warnings: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(" WARN ") && !l.contains("cannot reach Redis"))
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(
        warnings[0].contains("lock lost") && warnings[0].contains("order:3"),
        "{warnings:#?}"
    );
}

#[test]
fn a_long_registered_wait_warns_once_naming_the_holders_and_the_deadlock() {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let server = RedisServer::start();
    let (captured, subscriber) = warnings();
    logged(subscriber, async {
        let build = |name: &str| {
            Client::builder(server.url())
                .wait_registry(true)
                .long_wait_warning(Duration::from_millis(300))
                .client_name(name)
                .build()
        };
        let (a, b) = (build("svc-a").await.unwrap(), build("svc-b").await.unwrap());

        // A wait behind a holder that waits for nothing: the holder, no cycle.
        let holder = a.lock("z").lock().await.unwrap();
        let late = b.lock("z").try_lock_for(Duration::from_millis(700)).await;
        assert!(late.unwrap().is_none());
        one_long_wait_warning(&captured.text(), "z", holder.owner());
        holder.unlock().await.unwrap();
        let before = captured.text().len();

        // Two tasks, each holding the lock the other waits for, on two clients.
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(2));
        let cross = |client: Client, first: &'static str, then: &'static str| {
            let barrier = barrier.clone();
            tokio::spawn(async move {
                let held = client.lock(first).lock().await.unwrap();
                barrier.wait().await;
                let other = client.lock(then);
                let wait = other.try_lock_for(Duration::from_millis(1_500)).await;
                // Both waits over before either lock is freed: else the wait that ends
                // last could take the lock the other one frees at the end of its own.
                barrier.wait().await;
                assert!(wait.unwrap().is_none());
                held.unlock().await.unwrap();
            })
        };
        let (one, two) = (cross(a.clone(), "x", "y"), cross(b.clone(), "y", "x"));
        one.await.unwrap();
        two.await.unwrap();
        let text = captured.text()[before..].to_string();
        let warned: Vec<&str> = text.lines().filter(|l| l.contains(" WARN ")).collect();
        assert_eq!(warned.len(), 2, "one per wait:\n{text}");
        for line in warned {
            assert!(
                line.contains("waits for `x`") && line.contains("waits for `y`"),
                "{line}"
            );
            assert!(
                line.contains("(svc-a)") || line.contains("(svc-b)"),
                "{line}"
            );
        }
    });
}

#[test]
fn a_long_redlock_wait_warns_once_for_all_its_masters() {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let group = RedisGroup::start(3);
    let (captured, subscriber) = warnings();
    logged(subscriber, async {
        let clients = |name: &'static str| {
            let servers = &group.servers;
            async move {
                let mut clients = Vec::new();
                for server in servers {
                    let client = Client::builder(server.url())
                        .wait_registry(true)
                        .long_wait_warning(Duration::from_millis(300))
                        .client_name(name)
                        .build()
                        .await
                        .unwrap();
                    clients.push(client);
                }
                clients
            }
        };
        let (a, b) = (clients("svc-a").await, clients("svc-b").await);
        let redlock =
            |clients: &[Client]| RedLock::new(clients.iter().map(|c| c.lock("job")).collect());
        let holder = redlock(&a).lock().await.unwrap();
        // Recorded on all three masters, the wait warns once, naming the holder.
        let late = redlock(&b).try_lock_for(Duration::from_millis(900)).await;
        assert!(late.unwrap().is_none());
        one_long_wait_warning(&captured.text(), "job", holder.owner());
        holder.unlock().await.unwrap();
    });
}
