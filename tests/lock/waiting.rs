//! Waiting: woken by pub/sub, bounded by TTL and by the caller's wait, and robust to a
//! dropped pub/sub connection. (Waits cancelled by their caller: `cancellation/`.)

use std::time::{Duration, Instant};

use testkit::{client, eventually, RedisServer, Waiting};

const GENEROUS: Duration = Duration::from_secs(5);

#[tokio::test]
async fn a_waiter_is_woken_by_the_unlock_message_far_sooner_than_the_ttl() {
    let server = RedisServer::start();
    let (holder, waiter_client) = (client(&server).await, client(&server).await);
    let guard = holder.lock("job").lock().await.unwrap();

    let lock = waiter_client.lock("job");
    let waiter =
        Waiting::listening(&waiter_client, 1, async move { lock.lock().await.unwrap() }).await;
    assert_eq!(
        server.cli(&["PUBSUB", "NUMSUB", "redisson_lock__channel:{job}"]),
        "redisson_lock__channel:{job}\n1"
    );

    let woken = waiter
        .woken_by(async { guard.unlock().await.unwrap() })
        .await;
    // The lease is 30 s; only the message explains a hand-over this fast.
    let handover = woken.after;
    assert!(
        handover < Duration::from_millis(500),
        "hand-over took {handover:?}"
    );
    let guard = woken.value;
    assert!(guard.owner().starts_with(&waiter_client.id().to_string()));
    guard.unlock().await.unwrap();
    eventually("the waiter unsubscribed", GENEROUS, || {
        waiter_client.status().subscribed_channels == 0
    })
    .await;
}

#[tokio::test]
async fn a_wait_is_bounded_by_the_holders_ttl_when_no_message_comes() {
    let server = RedisServer::start();
    let (holder, waiter) = (client(&server).await, client(&server).await);
    // Expires silently: no unlock message is ever published.
    let stale = holder
        .lock("lease")
        .lock_with_lease(Duration::from_millis(400))
        .await
        .unwrap();
    let started = Instant::now();
    let guard = waiter.lock("lease").lock().await.unwrap();
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_millis(1_500),
        "waited {waited:?} for a 400 ms lease"
    );
    assert!(stale.is_lost());
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn try_lock_variants_honour_their_waits() {
    let server = RedisServer::start();
    let (holder, other) = (client(&server).await, client(&server).await);
    let lock = other.lock("busy");
    let guard = holder.lock("busy").lock().await.unwrap();

    let started = Instant::now();
    assert!(lock.try_lock().await.unwrap().is_none());
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "try_lock does not wait"
    );

    let started = Instant::now();
    assert!(lock
        .try_lock_for(Duration::from_millis(300))
        .await
        .unwrap()
        .is_none());
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(290),
        "gave up early: {waited:?}"
    );
    assert!(
        waited < Duration::from_millis(1_500),
        "gave up late: {waited:?}"
    );

    // Released during the wait: taken at once.
    let waiting = {
        let lock = lock.clone();
        Waiting::listening(&other, 1, async move {
            lock.try_lock_for(Duration::from_secs(10)).await
        })
        .await
    };
    let got = waiting
        .woken_by(async { guard.unlock().await.unwrap() })
        .await
        .value
        .unwrap()
        .expect("acquired within the wait");
    assert!(got.is_renewed_by_watchdog());
    got.unlock().await.unwrap();

    // try_lock_with: a fixed lease, no watchdog.
    let got = lock
        .try_lock_with(Duration::from_secs(1), Duration::from_millis(1_500))
        .await
        .unwrap()
        .unwrap();
    assert!(!got.is_renewed_by_watchdog());
    let ttl = lock.remaining_ttl().await.unwrap().unwrap();
    assert!(
        ttl <= Duration::from_millis(1_500) && ttl > Duration::from_millis(1_000),
        "{ttl:?}"
    );
    got.unlock().await.unwrap();
}

#[tokio::test]
async fn force_unlock_deletes_and_wakes_a_waiter() {
    let server = RedisServer::start();
    let (holder, waiter_client, admin) = (
        client(&server).await,
        client(&server).await,
        client(&server).await,
    );
    let held = holder.lock("stuck").lock().await.unwrap();
    let lock = waiter_client.lock("stuck");
    let waiter =
        Waiting::listening(&waiter_client, 1, async move { lock.lock().await.unwrap() }).await;

    let woken = waiter
        .woken_by(async { assert!(admin.lock("stuck").force_unlock().await.unwrap()) })
        .await;
    assert!(
        woken.after < Duration::from_millis(500),
        "woken by the message"
    );
    let guard = woken.value;

    // The old holder cannot release the new owner's lock.
    let err = held.unlock().await.unwrap_err();
    assert!(err.is_lock_lost(), "{err}");
    assert!(waiter_client.lock("stuck").is_locked().await.unwrap());
    guard.unlock().await.unwrap();
    assert!(
        !admin.lock("stuck").force_unlock().await.unwrap(),
        "nothing left to delete"
    );
}

#[tokio::test]
async fn waiters_survive_a_killed_pubsub_connection() {
    let server = RedisServer::start();
    let (holder, waiter_client) = (client(&server).await, client(&server).await);
    let guard = holder.lock("resilient").lock().await.unwrap();
    let lock = waiter_client.lock("resilient");
    let waiter =
        Waiting::listening(&waiter_client, 1, async move { lock.lock().await.unwrap() }).await;

    let killed = server.cli(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    assert_eq!(killed, "1", "one pub/sub connection killed");
    // Released while the waiter's client may still be reconnecting: the message may be lost,
    // and the lease is 30 s. The waiter must still get the lock within seconds.
    let woken = waiter
        .woken_by(async { guard.unlock().await.unwrap() })
        .await;
    assert!(woken.after < Duration::from_secs(3), "{:?}", woken.after);
    let guard = woken.value;

    // And the listener is back: a later hand-over is woken by its message again.
    let lock = holder.lock("resilient");
    let waiter = Waiting::listening(&holder, 1, async move { lock.lock().await.unwrap() }).await;
    let second = waiter
        .woken_by(async { guard.unlock().await.unwrap() })
        .await;
    assert!(
        second.after < Duration::from_millis(500),
        "{:?}",
        second.after
    );
    second.value.unlock().await.unwrap();
}

/// The id of the one pub/sub connection on a server (`CLIENT LIST TYPE pubsub`), and the
/// last command it ran; asked on `raw`, so that asking opens no connection.
async fn pubsub_connection(raw: &redis::aio::MultiplexedConnection) -> Option<(String, String)> {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut raw.clone())
        .await
        .unwrap();
    let line = list.lines().find(|line| line.contains("sub="))?;
    let field = |name: &str| {
        line.split(' ')
            .find_map(|part| part.strip_prefix(name)?.strip_prefix('='))
            .unwrap_or_default()
            .to_string()
    };
    Some((field("id"), field("cmd")))
}

/// `total_connections_received` of `INFO stats`, asked on `raw`.
async fn connections_received(raw: &redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query_async(&mut raw.clone())
        .await
        .unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("total_connections_received:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap()
}

#[tokio::test]
async fn the_pubsub_connection_is_kept_while_healthy_on_resp2_and_resp3() {
    for protocol in ["", "?protocol=resp3"] {
        let server = RedisServer::start();
        let raw = server.raw().await;
        let holder = client(&server).await;
        let waiter = redis_rlock::Client::builder(format!("{}{protocol}", server.url()))
            .ping_interval(Duration::from_millis(100))
            .build()
            .await
            .unwrap();
        let guard = holder.lock("kept").lock().await.unwrap();
        let lock = waiter.lock("kept");
        let waiting = Waiting::listening(&waiter, 1, async move {
            lock.lock().await.unwrap().unlock().await.unwrap()
        })
        .await;
        let (id, _) = pubsub_connection(&raw).await.expect("a pub/sub connection");
        let connections = connections_received(&raw).await;

        // Many pings later, the same connection still serves the waiter.
        let pinged = testkit::settles_to(true, GENEROUS, || async {
            pubsub_connection(&raw)
                .await
                .is_some_and(|(_, cmd)| cmd == "ping")
        })
        .await;
        assert!(pinged, "{protocol}: the connection is pinged");
        tokio::time::sleep(Duration::from_millis(800)).await;
        let (still, cmd) = pubsub_connection(&raw).await.expect("a pub/sub connection");
        assert_eq!(
            (&still, cmd.as_str()),
            (&id, "ping"),
            "{protocol}: one connection, pinged"
        );
        assert_eq!(
            connections_received(&raw).await,
            connections,
            "{protocol}: no new connection"
        );

        let woken = waiting
            .woken_by(async { guard.unlock().await.unwrap() })
            .await;
        assert!(woken.after < Duration::from_secs(1), "{protocol}");
    }
}
