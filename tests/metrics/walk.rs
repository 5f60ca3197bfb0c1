//! A walk through what the locks do, and the metrics each step moves.

use super::*;

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

    // Every counter and gauge series this walk moved was there, at zero, before it (the
    // walk's clients have no class rule: their class, `default`, is made with the first
    // client; `classes.rs` checks a rule's classes, made when their first handle is).
    let at_zero = series_in(&recorded().await.at_first_client);
    let in_default = |labels: &Vec<String>| {
        labels
            .iter()
            .all(|l| !l.starts_with("class=") || l == "class=default")
    };
    for series in seen.values.keys().filter(|(_, labels)| in_default(labels)) {
        assert_eq!(
            at_zero.get(series),
            Some(&0.0),
            "{series:?} was not made at zero"
        );
    }
}
