//! `CountDownLatch` (Redisson's `RCountDownLatch`): the count in Redis as raw commands see
//! it; waiters of several clients all released by the last count-down and none before it,
//! far sooner than the re-check bound; `wait_for` bounded; cancelled and killed waiters
//! leaving the count alone; a restarted server failing calls in bounded time, then
//! working; bad input writing nothing; a short cluster run in both pub/sub modes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis_rlock::{Client, Error, PubSubMode};
use testkit::{client, dbsize, eventually, raw_get, RedisCluster, RedisServer, Waiting};

/// For state that settles quickly, on a loaded machine.
const GENEROUS: Duration = Duration::from_secs(10);
/// What "woken by the message" means: well under the re-check bound.
const WOKEN_WITHIN: Duration = Duration::from_millis(1_000);

#[tokio::test]
async fn the_count_in_redis() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let client = client(&server).await;
    let latch = client.count_down_latch("batch:42");

    assert_eq!(latch.count().await.unwrap(), 0, "never set");
    latch.count_down().await.unwrap();
    assert_eq!(
        dbsize(&mut raw).await,
        0,
        "counting down nothing writes nothing"
    );
    assert!(latch.wait_for(Duration::ZERO).await.unwrap(), "open");

    assert!(latch.try_set_count(3).await.unwrap());
    assert!(!latch.try_set_count(5).await.unwrap());
    assert_eq!(raw_get(&mut raw, "batch:42").await.as_deref(), Some("3"));
    assert_eq!(testkit::pttl(&mut raw, "batch:42").await, -1);
    assert_eq!(latch.count().await.unwrap(), 3);
    latch.count_down().await.unwrap();
    assert_eq!(raw_get(&mut raw, "batch:42").await.as_deref(), Some("2"));
    assert!(!latch.wait_for(Duration::from_millis(50)).await.unwrap());
    latch.count_down().await.unwrap();
    latch.count_down().await.unwrap();
    // At zero the key is gone, as Redisson deletes it; the latch may be set again.
    assert_eq!(raw_get(&mut raw, "batch:42").await, None);
    assert_eq!(latch.count().await.unwrap(), 0);
    latch.wait().await.unwrap();
    latch.count_down().await.unwrap();
    assert_eq!(dbsize(&mut raw).await, 0);
    assert!(latch.try_set_count(1).await.unwrap());
    assert!(latch.delete().await.unwrap());
    assert!(!latch.delete().await.unwrap());
    assert_eq!(dbsize(&mut raw).await, 0);

    // A count of 0 is written as Redisson writes it: an open latch whose key stays.
    assert!(latch.try_set_count(0).await.unwrap());
    assert_eq!(raw_get(&mut raw, "batch:42").await.as_deref(), Some("0"));
    assert!(latch.wait_for(Duration::ZERO).await.unwrap());
    assert!(!latch.try_set_count(2).await.unwrap());
    // Counting it down deletes it without a message (Redisson: DECR to -1, DEL).
    latch.count_down().await.unwrap();
    assert_eq!(dbsize(&mut raw).await, 0);

    // The largest count: a Redis integer, exact.
    let big = i64::MAX as u64;
    assert!(latch.try_set_count(big).await.unwrap());
    assert_eq!(latch.count().await.unwrap(), big);
    latch.count_down().await.unwrap();
    assert_eq!(latch.count().await.unwrap(), big - 1);
    assert_eq!(
        raw_get(&mut raw, "batch:42").await.as_deref(),
        Some("9223372036854775806")
    );
    assert_eq!(client.status().subscribed_channels, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_count_down_releases_every_waiter_and_none_before() {
    const WAITERS: usize = 6;
    const COUNT: usize = 4;
    let server = RedisServer::start();
    let clients = [client(&server).await, client(&server).await];
    let counter = client(&server).await;
    let latch = counter.count_down_latch("gate");
    assert!(latch.try_set_count(COUNT as u64).await.unwrap());

    let counted = Arc::new(AtomicUsize::new(0));
    let mut waiters = Vec::new();
    for i in 0..WAITERS {
        let latch = clients[i % clients.len()].count_down_latch("gate");
        let counted = counted.clone();
        waiters.push(Waiting::spawn(async move {
            latch.wait().await.unwrap();
            counted.load(Ordering::SeqCst)
        }));
    }
    eventually("every waiter subscribed", GENEROUS, || {
        clients.iter().all(|c| c.status().subscribed_channels == 1)
    })
    .await;
    assert_eq!(
        server.cli(&[
            "PUBSUB",
            "NUMSUB",
            "redisson_countdownlatch__channel__{gate}"
        ]),
        "redisson_countdownlatch__channel__{gate}\n2",
        "one subscription per client, shared by its waiters"
    );
    for _ in 0..COUNT - 1 {
        latch.count_down().await.unwrap();
        counted.fetch_add(1, Ordering::SeqCst);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(waiters.iter().all(|w| !w.is_finished()), "opened early");
    counted.fetch_add(1, Ordering::SeqCst);
    let woken = Waiting::all_woken_by(waiters, async { latch.count_down().await.unwrap() }).await;
    for seen in woken.value {
        assert_eq!(
            seen, COUNT,
            "a waiter went through before the last count-down"
        );
    }
    let took = woken.after;
    assert!(took < WOKEN_WITHIN, "woken after {took:?}");
    for client in &clients {
        eventually("the waiters unsubscribed", GENEROUS, || {
            client.status().subscribed_channels == 0
        })
        .await;
    }
}

#[tokio::test]
async fn a_bounded_wait_ends_in_time_and_a_delete_or_a_new_count_is_heard() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let latch = a.count_down_latch("bounded");
    assert!(latch.try_set_count(1).await.unwrap());
    let started = Instant::now();
    assert!(!b
        .count_down_latch("bounded")
        .wait_for(Duration::from_millis(300))
        .await
        .unwrap());
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(290), "{waited:?}");
    assert!(waited < Duration::from_millis(2_000), "{waited:?}");
    assert_eq!(b.status().subscribed_channels, 0);

    // A delete opens the latch: its message wakes the waiter to read the count.
    let waiter = {
        let latch = b.count_down_latch("bounded");
        Waiting::listening(&b, 1, async move {
            latch.wait_for(Duration::from_secs(30)).await.unwrap()
        })
        .await
    };
    let woken = waiter
        .woken_by(async { assert!(latch.delete().await.unwrap()) })
        .await;
    assert!(woken.value);
    assert!(woken.after < WOKEN_WITHIN, "{:?}", woken.after);
}

#[tokio::test]
async fn cancelled_and_killed_waiters_leave_the_count_alone() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let client = client(&server).await;
    let latch = client.count_down_latch("left");
    assert!(latch.try_set_count(2).await.unwrap());

    let waiting = {
        let latch = latch.clone();
        tokio::spawn(async move { latch.wait().await })
    };
    eventually("the waiter subscribed", GENEROUS, || {
        client.status().subscribed_channels == 1
    })
    .await;
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    eventually("the subscription left", GENEROUS, || {
        client.status().subscribed_channels == 0
    })
    .await;
    assert_eq!(raw_get(&mut raw, "left").await.as_deref(), Some("2"));

    // A waiting process killed: its connections close, the count stays.
    let doomed = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let url = server.url();
    doomed.spawn(async move {
        let client = Client::connect(url).await.unwrap();
        let _ = client.count_down_latch("left").wait().await;
    });
    let channel = "redisson_countdownlatch__channel__{left}";
    let numsub = |n: u8| format!("{channel}\n{n}");
    let deadline = Instant::now() + GENEROUS;
    while server.cli(&["PUBSUB", "NUMSUB", channel]) != numsub(1) {
        assert!(Instant::now() < deadline, "the doomed waiter subscribed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    doomed.shutdown_background();
    let deadline = Instant::now() + GENEROUS;
    while server.cli(&["PUBSUB", "NUMSUB", channel]) != numsub(0) {
        assert!(
            Instant::now() < deadline,
            "the killed waiter's connection closed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(raw_get(&mut raw, "left").await.as_deref(), Some("2"));
    assert_eq!(dbsize(&mut raw).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_fails_calls_in_bounded_time_then_works() {
    let mut server = RedisServer::start();
    let client = client(&server).await;
    let latch = client.count_down_latch("restart");
    assert!(latch.try_set_count(1).await.unwrap());
    let waiter = {
        let latch = latch.clone();
        tokio::spawn(async move { latch.wait().await })
    };
    eventually("the waiter subscribed", GENEROUS, || {
        client.status().subscribed_channels == 1
    })
    .await;

    server.kill();
    let started = Instant::now();
    assert!(latch.count().await.unwrap_err().is_connection_error());
    assert!(latch.count_down().await.unwrap_err().is_connection_error());
    assert!(started.elapsed() < GENEROUS, "{:?}", started.elapsed());

    // Back without its data: the latch's count is gone, so it is open. The waiter reads
    // the count again once it is subscribed again (or fails, if it tried meanwhile).
    server.restart();
    let reopened = Instant::now();
    match tokio::time::timeout(GENEROUS, waiter)
        .await
        .unwrap()
        .unwrap()
    {
        Ok(()) => assert!(reopened.elapsed() < GENEROUS),
        Err(e) => assert!(e.is_connection_error(), "{e}"),
    }
    assert!(latch.try_set_count(1).await.unwrap());
    latch.count_down().await.unwrap();
    latch.wait().await.unwrap();
    assert_eq!(dbsize(&mut server.raw().await).await, 0);
}

#[tokio::test]
async fn bad_input_writes_nothing() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let client = client(&server).await;
    let latch = client.count_down_latch("bad");
    let err = latch.try_set_count(u64::MAX).await.unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
    let err = latch.try_set_count(i64::MAX as u64 + 1).await.unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
    let empty = client.count_down_latch("");
    assert!(empty.count().await.unwrap_err().is_invalid_argument());
    assert!(empty.wait().await.unwrap_err().is_invalid_argument());
    assert_eq!(dbsize(&mut raw).await, 0);

    // Keys of other kinds: a lock hash, a list, a string that is no count, a set.
    let lock = client.lock("taken").lock().await.unwrap();
    for (command, key, value) in [
        ("RPUSH", "queue", "x"),
        ("SET", "text", "1.5"),
        ("SADD", "set", "x"),
    ] {
        let _: () = redis::cmd(command)
            .arg(key)
            .arg(value)
            .query_async(&mut raw)
            .await
            .unwrap();
    }
    let before = dbsize(&mut raw).await;
    for key in ["taken", "queue", "text", "set"] {
        let latch = client.count_down_latch(key);
        let not = |e: Error| assert!(e.is_not_a_lock(), "{key}: {e}");
        not(latch.try_set_count(1).await.unwrap_err());
        not(latch.count_down().await.unwrap_err());
        not(latch.count().await.unwrap_err());
        not(latch.wait().await.unwrap_err());
        not(latch.wait_for(Duration::from_secs(1)).await.unwrap_err());
        not(latch.delete().await.unwrap_err());
    }
    assert_eq!(dbsize(&mut raw).await, before);
    assert_eq!(raw_get(&mut raw, "text").await.as_deref(), Some("1.5"));
    assert_eq!(client.status().subscribed_channels, 0);
    lock.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_in_both_pubsub_modes() {
    let cluster = RedisCluster::start_async().await;
    for (mode, name) in [
        (PubSubMode::Classic, "batch:classic"),
        (PubSubMode::Sharded, "batch:sharded"),
    ] {
        let connect = || {
            Client::cluster_builder(cluster.seeds())
                .pubsub_mode(mode)
                .build()
        };
        let (a, b) = (connect().await.unwrap(), connect().await.unwrap());
        let latch = a.count_down_latch(name);
        assert!(latch.try_set_count(1).await.unwrap());
        let waiter = {
            let latch = b.count_down_latch(name);
            Waiting::listening(&b, 1, async move { latch.wait().await.unwrap() }).await
        };
        let woken = waiter
            .woken_by(async { latch.count_down().await.unwrap() })
            .await;
        assert!(woken.after < WOKEN_WITHIN, "{mode:?}: {:?}", woken.after);
        assert_eq!(cluster.master_of_key(name).cli(&["EXISTS", name]), "0");
    }
    // Redisson adds braces around a latch's name for its channel: a name with a hash tag
    // of its own would split the latch over two slots, and is refused with nothing sent.
    let client = Client::connect_cluster(cluster.seeds()).await.unwrap();
    let err = client
        .count_down_latch("{user}:batch")
        .try_set_count(1)
        .await
        .unwrap_err();
    assert!(err.is_cross_slot_name(), "{err}");
}
