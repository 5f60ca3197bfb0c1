//! Sentinel clients: the master is found through the sentinels, every lock kind works on it,
//! and after a failover lock calls, renewals and unlock messages move to the new master by
//! themselves, with no acquire landing on the old master (still writable for seconds) more
//! than 2 s after the sentinels name the new one. A lock the failover lost is reported.
//!
//! Each test has its own master, replica and three sentinels: most are destructive.

use std::time::{Duration, Instant};

use redis_rlock::{Client, Error, LostReason};
use testkit::{key_exists, lock_hash, pttl, RedisSentinels, RedisServer, Waiting};

/// Roomy bounds for a loaded 2-core machine; what they bound takes milliseconds here.
const GENEROUS: Duration = Duration::from_secs(10);

async fn client(sentinels: &RedisSentinels, watchdog: Duration) -> Client {
    Client::sentinel_builder(sentinels.sentinel_urls(), sentinels.master_name())
        .watchdog_timeout(watchdog)
        .build()
        .await
        .expect("a Sentinel client connects")
}

/// Polls `condition` (a raw read of a server) until it holds, at most `limit`.
async fn until<F, Fut>(what: &str, limit: Duration, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let began = Instant::now();
    while !condition().await {
        assert!(began.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn numsub(server: &RedisServer, channel: &str) -> i64 {
    let (_, count): (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query_async(&mut server.raw().await)
        .await
        .unwrap();
    count
}

#[tokio::test]
async fn every_lock_kind_works_on_the_master_the_sentinels_name() {
    let sentinels = RedisSentinels::start("m1");
    let client = client(&sentinels, Duration::from_secs(30)).await;
    let mut on_master = sentinels.master().raw().await;

    let guard = client.lock("s:plain").lock().await.unwrap();
    let hash = lock_hash(&mut on_master, "s:plain").await;
    assert_eq!(hash.get(guard.owner()), Some(&1));
    let ttl = pttl(&mut on_master, "s:plain").await;
    assert!(
        (20_000..=30_000).contains(&ttl),
        "watchdog lease, got {ttl}"
    );
    guard.unlock().await.unwrap();
    assert!(!key_exists(&mut on_master, "s:plain").await);

    let fair = client.fair_lock("s:fair").lock().await.unwrap();
    assert!(key_exists(&mut on_master, "s:fair").await);
    fair.unlock().await.unwrap();

    let fenced = client.fenced_lock("s:fenced");
    let first = fenced.lock().await.unwrap();
    let token = first.fencing_token().unwrap();
    first.unlock().await.unwrap();
    let second = fenced.lock().await.unwrap();
    assert!(second.fencing_token().unwrap() > token, "tokens increase");
    second.unlock().await.unwrap();

    // And `shutdown` releases every kind there, waking another client's waiters at once.
    let other = self::client(&sentinels, Duration::from_secs(30)).await;
    testkit::every_kind::shutdown_releases_everything(&client, &other).await;
    assert!(testkit::fair_queue(&mut on_master, "fair-queued")
        .await
        .is_empty());
}

#[tokio::test]
async fn wrong_names_and_dead_sentinels_fail_at_once_with_typed_errors() {
    let sentinels = RedisSentinels::start("m1");
    let began = Instant::now();
    let unknown = Client::connect_sentinel(sentinels.sentinel_urls(), "no-such-master").await;
    match unknown {
        Err(Error::UnsupportedServer { reason, .. }) => {
            assert!(reason.contains("no-such-master"), "{reason}")
        }
        other => panic!("expected UnsupportedServer, got {other:?}"),
    }

    // A data node is no sentinel.
    let not_a_sentinel =
        Client::connect_sentinel([sentinels.master().url()], sentinels.master_name()).await;
    assert!(
        matches!(not_a_sentinel, Err(Error::UnsupportedServer { .. })),
        "{not_a_sentinel:?}"
    );

    // A dead first sentinel is passed over.
    let dead = RedisServer::start();
    let dead_url = dead.url();
    drop(dead);
    let mut urls = vec![dead_url.clone()];
    urls.extend(sentinels.sentinel_urls());
    let client = Client::connect_sentinel(&urls, sentinels.master_name())
        .await
        .expect("the second sentinel answers");
    client
        .lock("s:after-dead")
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();

    // Only dead sentinels: a connection error.
    let none = Client::sentinel_builder([dead_url], "m1")
        .connect_timeout(Duration::from_millis(500))
        .build()
        .await;
    assert!(
        none.as_ref().is_err_and(Error::is_connection_error),
        "{none:?}"
    );
    assert!(began.elapsed() < GENEROUS, "{:?}", began.elapsed());

    let empty = Client::connect_sentinel(Vec::<String>::new(), "m1").await;
    assert!(matches!(empty, Err(Error::InvalidArgument(_))), "{empty:?}");
    let nameless = Client::connect_sentinel(sentinels.sentinel_urls(), "").await;
    assert!(
        matches!(nameless, Err(Error::InvalidArgument(_))),
        "{nameless:?}"
    );
    // master_credentials is for Sentinel clients only.
    let misplaced = Client::builder(sentinels.master().url())
        .master_credentials(None, "pw")
        .build()
        .await;
    assert!(
        matches!(misplaced, Err(Error::InvalidArgument(_))),
        "{misplaced:?}"
    );
}

#[tokio::test]
async fn a_replicated_lock_survives_a_failover_and_its_renewals_follow_the_new_master() {
    let sentinels = RedisSentinels::start("m1");
    let watchdog = Duration::from_secs(3);
    let holder = client(&sentinels, watchdog).await;
    let waiter = client(&sentinels, watchdog).await;
    let guard = holder.lock("s:kept").lock().await.unwrap();
    let on_replica = sentinels.replica().raw().await;
    until("the replica has the lock", GENEROUS, || {
        let mut on_replica = on_replica.clone();
        async move { key_exists(&mut on_replica, "s:kept").await }
    })
    .await;

    let new_master = sentinels.failover().await;
    let mut on_new = new_master.raw().await;
    // Renewals land on the new master: its pttl, which only falls otherwise, goes up.
    let mut last = pttl(&mut on_new, "s:kept").await;
    let began = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let now = pttl(&mut on_new, "s:kept").await;
        assert!(now > 0, "the lock expired on the new master");
        if now > last {
            break;
        }
        last = now;
        assert!(began.elapsed() < GENEROUS, "no renewal on the new master");
    }
    assert!(!guard.is_lost(), "the failover kept the lock");

    // The waiter hears the unlock on the new master.
    let lock = waiter.lock("s:kept");
    let waiting = Waiting::spawn(async move {
        lock.try_lock_for(Duration::from_secs(30))
            .await
            .unwrap()
            .expect("the waiter gets the lock")
    });
    let channel = "redisson_lock__channel:{s:kept}";
    until("the waiter subscribed on the new master", GENEROUS, || {
        let new_master = &new_master;
        async move { numsub(new_master, channel).await == 1 }
    })
    .await;
    let woken = waiting
        .woken_by(async { guard.unlock().await.unwrap() })
        .await;
    let woke = woken.after;
    // Woken by the message: far less than the 3 s lease it would otherwise wait out.
    assert!(
        woke < Duration::from_millis(1500),
        "woke {woke:?} after the unlock"
    );
    woken.value.unlock().await.unwrap();
    assert!(!key_exists(&mut on_new, "s:kept").await);
}

#[tokio::test]
async fn no_acquire_lands_on_the_old_master_two_seconds_after_the_switch() {
    let sentinels = RedisSentinels::start("m1");
    let client = client(&sentinels, Duration::from_secs(30)).await;
    client
        .lock("s:warm")
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    let old_port = sentinels.master().port();
    let mut on_old = sentinels.master().raw().await;

    let new_master = sentinels.failover().await;
    let switched = Instant::now();
    let mut on_new = new_master.raw().await;
    let mut first_on_new = None;
    let mut i = 0;
    // The old master takes writes until the sentinels demote it, at least 8 s after the
    // switch: 4 s of acquires all happen before that.
    while switched.elapsed() < Duration::from_secs(4) {
        let name = format!("s:after:{i}");
        i += 1;
        let started = switched.elapsed();
        let guard = client
            .lock(&name)
            .lock_with_lease(Duration::from_secs(60))
            .await
            .unwrap();
        let on_new_master = key_exists(&mut on_new, &name).await;
        let on_old_master = key_exists(&mut on_old, &name).await;
        if on_new_master && first_on_new.is_none() {
            first_on_new = Some(started);
        }
        if started > Duration::from_secs(2) {
            assert!(
                on_new_master && !on_old_master,
                "{name}, {started:?} after the switch, landed on the old master (port {old_port})"
            );
        }
        drop(guard);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let first = first_on_new.expect("acquires reached the new master");
    eprintln!("first acquire on the new master {first:?} after the sentinels named it");
}

#[tokio::test]
async fn a_lock_the_failover_lost_is_reported_and_its_unlock_spares_the_new_owner() {
    let mut sentinels = RedisSentinels::start("m1");
    let holder = client(&sentinels, Duration::from_secs(3)).await;
    // The replica must not get the lock: frozen, and cut off so the write does not wait in
    // its socket to survive (both are needed).
    let replica_port = sentinels.replica().port();
    sentinels.replica().freeze();
    redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("replica")
        .query_async::<i64>(&mut sentinels.master().raw().await)
        .await
        .unwrap();
    let guard = holder.lock("s:lost").lock().await.unwrap();
    sentinels.kill_master();
    sentinels.replica().thaw();
    let new_master = sentinels.wait_for_master(replica_port).await;
    let named = Instant::now();
    let mut on_new = new_master.raw().await;
    assert!(
        !key_exists(&mut on_new, "s:lost").await,
        "the replica never got it"
    );

    let reason = tokio::time::timeout(GENEROUS, guard.lost())
        .await
        .expect("the loss is reported");
    assert_eq!(reason, LostReason::Released, "{reason}");
    let reported = named.elapsed();
    // One renewal round (1 s at a 3 s lease) after the client follows the new master.
    assert!(
        reported < Duration::from_secs(4),
        "reported {reported:?} after the switch"
    );

    let other = client(&sentinels, Duration::from_secs(30)).await;
    let theirs = other.lock("s:lost").lock().await.unwrap();
    assert!(
        guard.unlock().await.is_err(),
        "unlocking a lost lock is an error"
    );
    let hash = lock_hash(&mut on_new, "s:lost").await;
    assert_eq!(
        hash.get(theirs.owner()),
        Some(&1),
        "the new owner's lock is untouched"
    );
}

#[tokio::test]
async fn replica_sync_waits_on_the_master() {
    let sentinels = RedisSentinels::start("m1");
    let client = Client::sentinel_builder(sentinels.sentinel_urls(), sentinels.master_name())
        .replica_sync(1, Duration::from_millis(500))
        .build()
        .await
        .unwrap();
    let mut on_replica = sentinels.replica().raw().await;
    for i in 0..10 {
        let name = format!("s:synced:{i}");
        let guard = client.lock(&name).lock().await.unwrap();
        // Read at once from the replica: WAIT made sure it has the write.
        let hash = lock_hash(&mut on_replica, &name).await;
        assert_eq!(hash.get(guard.owner()), Some(&1), "{name} on the replica");
        guard.unlock().await.unwrap();
    }
}

#[tokio::test]
async fn master_credentials_reach_the_master_and_not_the_sentinels() {
    let sentinels = RedisSentinels::start("m1");
    // The sentinels take no password; the master has a user of its own (ACLs are not
    // replicated: both data nodes get it). The default user stays open for the harness.
    for node in sentinels.nodes() {
        let _: () = node
            .query(redis::cmd("ACL").arg(&[
                "SETUSER",
                "locker",
                "on",
                ">locker-pw",
                "~*",
                "&*",
                "+@all",
            ]))
            .unwrap();
    }
    let client = Client::sentinel_builder(sentinels.sentinel_urls(), "m1")
        .master_credentials(Some("locker"), "locker-pw")
        .build()
        .await
        .expect("the sentinels take no AUTH, the master takes the user's");
    let guard = client.lock("s:as-locker").lock().await.unwrap();
    let clients: String = sentinels
        .master()
        .query(redis::cmd("CLIENT").arg("LIST"))
        .unwrap();
    assert!(clients.contains("user=locker"), "{clients}");
    guard.unlock().await.unwrap();

    let refused = Client::sentinel_builder(sentinels.sentinel_urls(), "m1")
        .master_credentials(Some("locker"), "wrong")
        .build()
        .await;
    assert!(
        refused.as_ref().is_err_and(Error::is_auth_error),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_redlock_refuses_one_master_reached_twice() {
    use redis_rlock::RedLock;
    let sentinels = RedisSentinels::start("m1");
    let a = client(&sentinels, Duration::from_secs(30)).await;
    // The same master through one sentinel only: still the same master.
    let b = Client::connect_sentinel(&sentinels.sentinel_urls()[2..], "m1")
        .await
        .unwrap();
    let direct = Client::connect(sentinels.master().url()).await.unwrap();
    for (what, other) in [("through the sentinels", &b), ("by its address", &direct)] {
        let group = RedLock::new(vec![a.lock("s:red"), other.lock("s:red")]);
        match group.try_lock().await {
            Err(Error::InvalidArgument(message)) => {
                assert!(message.contains("given twice"), "{what}: {message}")
            }
            other => panic!("{what}: expected InvalidArgument, got {other:?}"),
        }
    }
    let mut on_master = sentinels.master().raw().await;
    assert!(
        !key_exists(&mut on_master, "s:red").await,
        "nothing written"
    );
}
