//! Waiting: woken by pub/sub, bounded by TTL and by the caller's wait, cancel safe, and
//! robust to a dropped pub/sub connection.

use std::time::{Duration, Instant};

use testkit::{client, eventually, RedisServer};

const GENEROUS: Duration = Duration::from_secs(5);

#[tokio::test]
async fn a_waiter_is_woken_by_the_unlock_message_far_sooner_than_the_ttl() {
    let server = RedisServer::start();
    let (holder, waiter_client) = (client(&server).await, client(&server).await);
    let guard = holder.lock("job").lock().await.unwrap();

    let lock = waiter_client.lock("job");
    let waiter = tokio::spawn(async move {
        let guard = lock.lock().await.unwrap();
        (Instant::now(), guard)
    });
    eventually("the waiter subscribed", GENEROUS, || {
        waiter_client.subscribed_channel_count() == 1
    })
    .await;
    assert_eq!(
        server.cli(&["PUBSUB", "NUMSUB", "redisson_lock__channel:{job}"]),
        "redisson_lock__channel:{job}\n1"
    );

    let released = Instant::now();
    guard.unlock().await.unwrap();
    let (acquired, guard) = waiter.await.unwrap();
    let handover = acquired - released;
    // The lease is 30 s; only the message explains a hand-over this fast.
    assert!(
        handover < Duration::from_millis(500),
        "hand-over took {handover:?}"
    );
    assert!(guard.owner().starts_with(&waiter_client.id().to_string()));
    guard.unlock().await.unwrap();
    eventually("the waiter unsubscribed", GENEROUS, || {
        waiter_client.subscribed_channel_count() == 0
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
        tokio::spawn(async move { lock.try_lock_for(Duration::from_secs(10)).await })
    };
    eventually("the waiter subscribed", GENEROUS, || {
        other.subscribed_channel_count() == 1
    })
    .await;
    guard.unlock().await.unwrap();
    let got = waiting
        .await
        .unwrap()
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
    let waiter = tokio::spawn(async move { lock.lock().await.unwrap() });
    eventually("the waiter subscribed", GENEROUS, || {
        waiter_client.subscribed_channel_count() == 1
    })
    .await;

    let forced = Instant::now();
    assert!(admin.lock("stuck").force_unlock().await.unwrap());
    let guard = tokio::time::timeout(GENEROUS, waiter)
        .await
        .unwrap()
        .unwrap();
    assert!(
        forced.elapsed() < Duration::from_millis(500),
        "woken by the message"
    );

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
    let waiter = tokio::spawn(async move { lock.lock().await.unwrap() });
    eventually("the waiter subscribed", GENEROUS, || {
        waiter_client.subscribed_channel_count() == 1
    })
    .await;

    let killed = server.cli(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    assert_eq!(killed, "1", "one pub/sub connection killed");
    // Released while the waiter's client may still be reconnecting: the message may be lost,
    // and the lease is 30 s. The waiter must still get the lock within seconds.
    let released = Instant::now();
    guard.unlock().await.unwrap();
    let guard = tokio::time::timeout(GENEROUS, waiter)
        .await
        .expect("the waiter got the lock after the pub/sub connection was killed")
        .unwrap();
    assert!(released.elapsed() < Duration::from_secs(3));

    // And the listener is back: a later hand-over is woken by its message again.
    let lock = holder.lock("resilient");
    let waiter = tokio::spawn(async move { lock.lock().await.unwrap() });
    eventually("the second waiter subscribed", GENEROUS, || {
        holder.subscribed_channel_count() == 1
    })
    .await;
    let released = Instant::now();
    guard.unlock().await.unwrap();
    let second = waiter.await.unwrap();
    assert!(released.elapsed() < Duration::from_millis(500));
    second.unlock().await.unwrap();
}

#[tokio::test]
async fn a_cancelled_wait_leaves_no_subscription_and_no_lock() {
    let server = RedisServer::start();
    let (holder, waiter_client) = (client(&server).await, client(&server).await);
    let guard = holder.lock("cancel").lock().await.unwrap();
    let lock = waiter_client.lock("cancel");

    let waited = tokio::time::timeout(Duration::from_millis(200), lock.lock()).await;
    assert!(waited.is_err(), "still held: the wait was cancelled");
    assert_eq!(waiter_client.subscribed_channel_count(), 0);
    let channel = "redisson_lock__channel:{cancel}";
    eventually("Redis dropped the subscription", GENEROUS, || {
        server.cli(&["PUBSUB", "NUMSUB", channel]) == format!("{channel}\n0")
    })
    .await;
    guard.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test]
async fn lock_calls_cancelled_at_any_point_never_leave_the_lock_held() {
    let server = RedisServer::start();
    let (holder, client) = (client(&server).await, client(&server).await);
    let lock = client.lock("racy");
    // Cancel after every delay from 0 to ~3 ms, both on a free lock and while another
    // client holds it and releases it: some calls are dropped with their script in flight.
    for round in 0..60u64 {
        let held = if round % 2 == 0 {
            Some(holder.lock("racy").lock().await.unwrap())
        } else {
            None
        };
        let cancel_after = Duration::from_micros(round * 50);
        let releaser = held.map(|guard| tokio::spawn(async move { guard.unlock().await }));
        if let Ok(guard) = tokio::time::timeout(cancel_after, lock.lock()).await {
            guard.unwrap().unlock().await.unwrap();
        }
        if let Some(releaser) = releaser {
            releaser.await.unwrap().unwrap();
        }
    }
    // Anything a cancelled call took is released in the background right away; the lease
    // (30 s) would be far slower.
    let lock_free = {
        let lock = lock.clone();
        async move {
            while lock.is_locked().await.unwrap() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(3), lock_free)
        .await
        .expect("no cancelled call left the lock held");
    assert_eq!(client.subscribed_channel_count(), 0);
}

#[tokio::test]
async fn a_call_abandoned_while_redis_is_frozen_leaves_no_lock_once_it_thaws() {
    let server = RedisServer::start();
    let client = redis_rlock::Client::builder(server.url())
        .response_timeout(Duration::from_millis(400))
        .retry_delay(Duration::from_millis(50))
        .build()
        .await
        .unwrap();
    let lock = client.lock("frozen-cancel");
    server.freeze();
    // The caller gives up before the command's own timeout; Redis runs it when it thaws.
    let gave_up = tokio::time::timeout(Duration::from_millis(100), lock.lock()).await;
    assert!(gave_up.is_err());
    tokio::time::sleep(Duration::from_millis(600)).await; // the abandoned call times out
    server.thaw();
    let raw = server.raw().await;
    let ttl = testkit::settles_to(-2, Duration::from_secs(3), || {
        let mut raw = raw.clone();
        async move { testkit::pttl(&mut raw, "frozen-cancel").await }
    })
    .await;
    assert_eq!(
        ttl, -2,
        "the abandoned acquire was undone, not left for its 30 s lease"
    );
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
        let waiting = tokio::spawn(async move { lock.lock().await.unwrap().unlock().await });
        eventually("the waiter subscribed", GENEROUS, || {
            waiter.subscribed_channel_count() == 1
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

        let released = Instant::now();
        guard.unlock().await.unwrap();
        tokio::time::timeout(GENEROUS, waiting)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(released.elapsed() < Duration::from_secs(1), "{protocol}");
    }
}
