//! `Semaphore` (Redisson's `RSemaphore`): the count in Redis as raw commands see it through
//! every call; never more holders than permits under contention, mixed permit sizes
//! included; a waiter woken by a release far sooner than the re-check bound; cancelled
//! waits taking nothing; a killed holder's permits staying taken (the documented
//! behaviour); a restarted server failing calls in bounded time, then working; bad input
//! writing nothing; a short cluster run in both pub/sub modes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis_rlock::{Client, Error, PubSubMode};
use testkit::{
    client, count_becomes, dbsize, eventually, raw_get, RedisCluster, RedisServer, Waiting,
};

/// For state that settles quickly, on a loaded machine.
const GENEROUS: Duration = Duration::from_secs(10);
/// What "woken by the message" means: well under the re-check bound.
const WOKEN_WITHIN: Duration = Duration::from_millis(1_000);

#[tokio::test]
async fn every_call_shows_in_the_raw_count() {
    assert!(redis_rlock::sync::RECHECK > 4 * WOKEN_WITHIN);
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let client = client(&server).await;
    let pool = client.semaphore("db:pool");

    assert_eq!(pool.available_permits().await.unwrap(), 0, "no count yet");
    assert!(pool.try_acquire(1).await.unwrap().is_none(), "nothing set");
    assert!(pool.try_set_permits(10).await.unwrap());
    assert_eq!(raw_get(&mut raw, "db:pool").await.as_deref(), Some("10"));
    assert!(!pool.try_set_permits(3).await.unwrap(), "set once");
    assert_eq!(raw_get(&mut raw, "db:pool").await.as_deref(), Some("10"));
    // Redisson's layout: the count alone, no expiry, nothing else.
    assert_eq!(dbsize(&mut raw).await, 1);
    assert_eq!(testkit::pttl(&mut raw, "db:pool").await, -1);

    let two = pool.acquire(2).await.unwrap();
    assert_eq!(two.permits(), 2);
    assert_eq!(two.semaphore(), "db:pool");
    assert_eq!(raw_get(&mut raw, "db:pool").await.as_deref(), Some("8"));
    assert!(pool.try_acquire(9).await.unwrap().is_none());
    assert_eq!(raw_get(&mut raw, "db:pool").await.as_deref(), Some("8"));
    let eight = pool.try_acquire(8).await.unwrap().expect("8 free");
    assert_eq!(pool.available_permits().await.unwrap(), 0);
    two.release().await.unwrap();
    assert_eq!(raw_get(&mut raw, "db:pool").await.as_deref(), Some("2"));

    // Drop gives back in the background.
    drop(eight);
    count_becomes(&raw, "db:pool", "10").await;

    // forget(): the permits stay taken, even once the guard is gone; a guardless release
    // gives them back.
    let kept = pool.acquire(3).await.unwrap().forget();
    assert_eq!(kept, 3);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(raw_get(&mut raw, "db:pool").await.as_deref(), Some("7"));
    pool.release(3).await.unwrap();
    assert_eq!(raw_get(&mut raw, "db:pool").await.as_deref(), Some("10"));

    // addPermits, drainPermits, delete as Redisson has them.
    pool.add_permits(5).await.unwrap();
    assert_eq!(raw_get(&mut raw, "db:pool").await.as_deref(), Some("15"));
    pool.add_permits(-16).await.unwrap();
    assert_eq!(raw_get(&mut raw, "db:pool").await.as_deref(), Some("-1"));
    assert_eq!(
        pool.available_permits().await.unwrap(),
        0,
        "below zero reads 0"
    );
    pool.release(1).await.unwrap();
    assert_eq!(raw_get(&mut raw, "db:pool").await.as_deref(), Some("0"));
    pool.add_permits(4).await.unwrap();
    assert_eq!(pool.drain_permits().await.unwrap(), 4);
    assert_eq!(raw_get(&mut raw, "db:pool").await.as_deref(), Some("0"));
    assert!(pool.delete().await.unwrap());
    assert!(!pool.delete().await.unwrap());
    assert_eq!(dbsize(&mut raw).await, 0);

    // A count of 0 is a closed gate.
    assert!(pool.try_set_permits(0).await.unwrap());
    assert_eq!(raw_get(&mut raw, "db:pool").await.as_deref(), Some("0"));
    assert!(pool.try_acquire(1).await.unwrap().is_none());
    assert_eq!(
        client.status().subscribed_channels,
        0,
        "a try never subscribes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_more_holders_than_permits() {
    const PERMITS: usize = 3;
    const TASKS: usize = 12;
    const ROUNDS: usize = 8;
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let clients = [
        client(&server).await,
        client(&server).await,
        client(&server).await,
    ];
    assert!(clients[0]
        .semaphore("pool")
        .try_set_permits(PERMITS as u64)
        .await
        .unwrap());

    let in_use = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let pool = clients[task % clients.len()].semaphore("pool");
        let (in_use, most) = (in_use.clone(), most.clone());
        // Every third task takes two permits at a time: sizes mix on one channel.
        let size = if task % 3 == 0 { 2 } else { 1 };
        tasks.push(tokio::spawn(async move {
            for _ in 0..ROUNDS {
                let permits = pool.acquire(size as u64).await.unwrap();
                let now = in_use.fetch_add(size, Ordering::SeqCst) + size;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(3)).await;
                in_use.fetch_sub(size, Ordering::SeqCst);
                permits.release().await.unwrap();
            }
        }));
    }
    let started = Instant::now();
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("the tasks finish")
            .unwrap();
    }
    let most = most.load(Ordering::SeqCst);
    assert!(
        most <= PERMITS,
        "{most} permits in use at once, of {PERMITS}"
    );
    assert!(most >= 2, "the permits were shared ({most} at most)");
    assert_eq!(raw_get(&mut raw, "pool").await.as_deref(), Some("3"));
    for client in &clients {
        assert_eq!(client.status().subscribed_channels, 0);
    }
    eprintln!("{} acquisitions in {:?}", TASKS * ROUNDS, started.elapsed());
}

#[tokio::test]
async fn a_release_wakes_waiters_far_sooner_than_the_recheck() {
    let server = RedisServer::start();
    let (holder, waiters) = (client(&server).await, client(&server).await);
    let pool = holder.semaphore("wake");
    assert!(pool.try_set_permits(2).await.unwrap());
    let held = pool.acquire(2).await.unwrap();

    // A waiter for 2 arrived first, then two waiters for 1, all of one client: a release
    // of 1 must reach a waiter for 1, whatever the order.
    let spawn_waiter = |permits: u64| {
        let pool = waiters.semaphore("wake");
        tokio::spawn(async move {
            let guard = pool.acquire(permits).await.unwrap();
            (Instant::now(), guard)
        })
    };
    let big = spawn_waiter(2);
    eventually("the first waiter subscribed", GENEROUS, || {
        waiters.status().subscribed_channels == 1
    })
    .await;
    assert_eq!(
        server.cli(&["PUBSUB", "NUMSUB", "redisson_sc:{wake}"]),
        "redisson_sc:{wake}\n1"
    );
    let small = [spawn_waiter(1), spawn_waiter(1)];
    tokio::time::sleep(Duration::from_millis(100)).await;

    let released = Instant::now();
    pool.release(1).await.unwrap();
    let mut small = Vec::from(small);
    let deadline = Instant::now() + GENEROUS;
    let done = loop {
        if let Some(done) = small.iter().position(|waiter| waiter.is_finished()) {
            break done;
        }
        assert!(Instant::now() < deadline, "no waiter for 1 got the permit");
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let first = small.swap_remove(done);
    let (woken, guard) = first.await.unwrap();
    let took = woken - released;
    assert!(took < WOKEN_WITHIN, "a waiter for 1 got it after {took:?}");
    assert!(!big.is_finished(), "1 permit free, 2 wanted");
    drop(guard);
    // The dropped guard's permit and this one: 2 free, for the waiter that wants 2 or the
    // other waiter for 1, whichever tries first; both are served within the bound.
    held.release().await.unwrap();
    let started = Instant::now();
    let (_, big_guard) = tokio::time::timeout(GENEROUS, big).await.unwrap().unwrap();
    drop(big_guard);
    for waiter in small {
        let (_, guard) = tokio::time::timeout(GENEROUS, waiter)
            .await
            .unwrap()
            .unwrap();
        drop(guard);
    }
    assert!(
        started.elapsed() < 2 * WOKEN_WITHIN,
        "served after {:?}",
        started.elapsed()
    );
    // The two permits held and the one given back without a guard.
    count_becomes(&server.raw().await, "wake", "3").await;
}

#[tokio::test]
async fn a_cancelled_wait_takes_nothing() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let client = client(&server).await;
    let pool = client.semaphore("cancel");
    assert!(pool.try_set_permits(0).await.unwrap());

    let waiting = {
        let pool = pool.clone();
        tokio::spawn(async move { pool.acquire(1).await })
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
    pool.add_permits(1).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(raw_get(&mut raw, "cancel").await.as_deref(), Some("1"));

    // A wait that runs out takes nothing either.
    let other = client.semaphore("cancel");
    let held = other.acquire(1).await.unwrap();
    let started = Instant::now();
    assert!(pool
        .try_acquire_for(1, Duration::from_millis(300))
        .await
        .unwrap()
        .is_none());
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(290), "{waited:?}");
    assert!(waited < Duration::from_millis(2_000), "{waited:?}");
    assert_eq!(raw_get(&mut raw, "cancel").await.as_deref(), Some("0"));
    held.release().await.unwrap();
    assert_eq!(raw_get(&mut raw, "cancel").await.as_deref(), Some("1"));

    // Cancelled at every moment of a try that succeeds: whatever it took comes back.
    for delay_us in [0, 100, 300, 600, 1_000, 2_000] {
        let pool = pool.clone();
        let call = tokio::spawn(async move {
            tokio::time::timeout(Duration::from_micros(delay_us), pool.acquire(1)).await
        });
        if let Ok(Ok(guard)) = call.await.unwrap() {
            drop(guard);
        }
        count_becomes(&raw, "cancel", "1").await;
    }
}

#[tokio::test]
async fn a_killed_holder_keeps_its_permits_taken() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let survivor = client(&server).await;
    let pool = survivor.semaphore("crash");
    assert!(pool.try_set_permits(3).await.unwrap());

    // A process of its own: its runtime shut down is its crash.
    let doomed = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let url = server.url();
    let (taken_tx, taken_rx) = tokio::sync::oneshot::channel();
    doomed.spawn(async move {
        let client = Client::connect(url).await.unwrap();
        let permits = client.semaphore("crash").acquire(2).await.unwrap();
        let _ = taken_tx.send(());
        std::future::pending::<()>().await;
        drop(permits);
    });
    taken_rx.await.unwrap();
    assert_eq!(raw_get(&mut raw, "crash").await.as_deref(), Some("1"));
    doomed.shutdown_background();
    tokio::time::sleep(Duration::from_millis(300)).await;

    // No owner, no expiry: the two permits stay taken (the documented behaviour; an
    // expirable semaphore gives them back when their lease runs out).
    assert_eq!(raw_get(&mut raw, "crash").await.as_deref(), Some("1"));
    assert_eq!(testkit::pttl(&mut raw, "crash").await, -1);
    assert!(pool.try_acquire(2).await.unwrap().is_none());
    // Someone who knows gives them back.
    pool.release(2).await.unwrap();
    assert!(pool.try_acquire(3).await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_fails_calls_in_bounded_time_then_works() {
    let mut server = RedisServer::start();
    let client = client(&server).await;
    let pool = client.semaphore("restart");
    assert!(pool.try_set_permits(1).await.unwrap());
    let held = pool.acquire(1).await.unwrap();
    let waiter = {
        let pool = pool.clone();
        tokio::spawn(async move { pool.acquire(1).await })
    };
    eventually("the waiter subscribed", GENEROUS, || {
        client.status().subscribed_channels == 1
    })
    .await;

    server.kill();
    let started = Instant::now();
    let failed = pool.try_set_permits(1).await;
    assert!(failed.unwrap_err().is_connection_error());
    assert!(started.elapsed() < GENEROUS, "{:?}", started.elapsed());
    let started = Instant::now();
    assert!(held.release().await.unwrap_err().is_connection_error());
    assert!(started.elapsed() < GENEROUS, "{:?}", started.elapsed());

    // Back, empty: the waiter resubscribes and is woken by the new count.
    server.restart();
    let mut raw = server.raw().await;
    assert_eq!(raw_get(&mut raw, "restart").await, None);
    let waiting_since = Instant::now();
    let setter = testkit::client(&server).await;
    let woken = tokio::time::timeout(GENEROUS, async {
        // The waiter may be between tries while Redis is down: it fails or gets through.
        loop {
            if setter
                .semaphore("restart")
                .try_set_permits(1)
                .await
                .unwrap()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(woken.is_ok());
    match tokio::time::timeout(GENEROUS, waiter)
        .await
        .unwrap()
        .unwrap()
    {
        Ok(guard) => {
            assert!(waiting_since.elapsed() < GENEROUS);
            assert_eq!(raw_get(&mut raw, "restart").await.as_deref(), Some("0"));
            guard.release().await.unwrap();
        }
        Err(e) => assert!(e.is_connection_error(), "{e}"),
    }
    let guard = pool.acquire(1).await.unwrap();
    guard.release().await.unwrap();
    assert_eq!(raw_get(&mut raw, "restart").await.as_deref(), Some("1"));
}

#[tokio::test]
async fn bad_input_writes_nothing() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let client = client(&server).await;
    let pool = client.semaphore("bad");
    assert!(pool.try_set_permits(5).await.unwrap());

    let invalid = |e: Error| assert!(e.is_invalid_argument(), "{e}");
    invalid(pool.acquire(0).await.unwrap_err());
    invalid(pool.try_acquire(0).await.unwrap_err());
    invalid(pool.try_acquire(1 << 31).await.unwrap_err());
    invalid(pool.release(0).await.unwrap_err());
    invalid(pool.release(u64::MAX).await.unwrap_err());
    invalid(pool.add_permits(0).await.unwrap_err());
    invalid(pool.add_permits(1 << 31).await.unwrap_err());
    invalid(pool.try_set_permits(1 << 31).await.unwrap_err());
    invalid(client.semaphore("").available_permits().await.unwrap_err());
    // A count that would overflow a Java int: refused by Redis, nothing written.
    pool.add_permits(2_147_483_640).await.unwrap();
    let over = pool.release(10).await.unwrap_err();
    assert!(matches!(over, Error::Rejected { .. }), "{over:?}");
    assert_eq!(
        raw_get(&mut raw, "bad").await.as_deref(),
        Some("2147483645"),
        "unchanged"
    );
    let under = pool.add_permits(-2_147_483_647).await;
    assert!(under.is_ok(), "{under:?}");
    let under = pool.add_permits(-2_147_483_647).await.unwrap_err();
    assert!(matches!(under, Error::Rejected { .. }), "{under:?}");
    assert_eq!(raw_get(&mut raw, "bad").await.as_deref(), Some("-2"));

    // Keys of other kinds: a lock hash, a list, a string that is no count.
    let lock = client.lock("taken").lock().await.unwrap();
    let _: () = redis::cmd("RPUSH")
        .arg("queue")
        .arg("x")
        .query_async(&mut raw)
        .await
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("text")
        .arg("ten")
        .query_async(&mut raw)
        .await
        .unwrap();
    let before = dbsize(&mut raw).await;
    for key in ["taken", "queue", "text"] {
        let sem = client.semaphore(key);
        let not = |e: Error| assert!(e.is_not_a_lock(), "{key}: {e}");
        not(sem.try_set_permits(1).await.unwrap_err());
        not(sem.acquire(1).await.unwrap_err());
        not(sem.try_acquire(1).await.unwrap_err());
        not(sem.release(1).await.unwrap_err());
        not(sem.add_permits(1).await.unwrap_err());
        not(sem.available_permits().await.unwrap_err());
        not(sem.drain_permits().await.unwrap_err());
        not(sem.delete().await.unwrap_err());
    }
    let err = client.semaphore("taken").acquire(1).await.unwrap_err();
    assert!(err.to_string().contains("a hash"), "{err}");
    assert_eq!(dbsize(&mut raw).await, before);
    assert_eq!(raw_get(&mut raw, "text").await.as_deref(), Some("ten"));
    assert!(!lock.is_lost());
    lock.unlock().await.unwrap();
    assert_eq!(client.status().subscribed_channels, 0);
}

async fn cluster_client(cluster: &RedisCluster, mode: PubSubMode) -> Client {
    Client::cluster_builder(cluster.seeds())
        .pubsub_mode(mode)
        .build()
        .await
        .expect("a cluster client connects")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_in_both_pubsub_modes() {
    let cluster = RedisCluster::start_async().await;
    for (mode, name) in [
        (PubSubMode::Classic, "pool:classic"),
        (PubSubMode::Sharded, "pool:sharded"),
    ] {
        let (a, b) = (
            cluster_client(&cluster, mode).await,
            cluster_client(&cluster, mode).await,
        );
        let pool = a.semaphore(name);
        assert!(pool.try_set_permits(1).await.unwrap());
        let held = pool.acquire(1).await.unwrap();
        let waiter = {
            let pool = b.semaphore(name);
            Waiting::listening(&b, 1, async move { pool.acquire(1).await.unwrap() }).await
        };
        let woken = waiter
            .woken_by(async { held.release().await.unwrap() })
            .await;
        assert!(woken.after < WOKEN_WITHIN, "{mode:?}: {:?}", woken.after);
        let master = cluster.master_of_key(name);
        assert_eq!(master.cli(&["GET", name]), "0", "{mode:?}");
        woken.value.release().await.unwrap();
        assert_eq!(master.cli(&["GET", name]), "1", "{mode:?}");
    }
    // A name whose channel a cluster would put in another slot is refused, nothing sent.
    let client = cluster_client(&cluster, PubSubMode::Auto).await;
    let err = client
        .semaphore("a{b")
        .try_set_permits(1)
        .await
        .unwrap_err();
    assert!(err.is_cross_slot_name(), "{err}");
}
