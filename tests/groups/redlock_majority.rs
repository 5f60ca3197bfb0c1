//! RedLock over independent masters, all up: two groups exclude each other and release on
//! every master, a waiting group is woken by the unlock and waits without polling (a
//! `MultiLock` too), reentrancy counts 2 on every master, the watchdog keeps the lock over
//! several leases, and an unlock returns once a majority has released.

use std::time::{Duration, Instant};

use redis_rlock::MultiLock;
use testkit::group::{clients, held_on, redlock};
use testkit::{lock_hash, pttl, settles_to, RedisGroup, RedisServer, Waiting};

const GENEROUS: Duration = Duration::from_secs(5);

/// Script calls a server has run so far.
fn script_calls(server: &RedisServer) -> i64 {
    testkit::info_field(server, "commandstats", "cmdstat_evalsha", "calls")
}

#[tokio::test]
async fn two_redlock_groups_exclude_each_other_and_release_everywhere() {
    let group = RedisGroup::start(5);
    let (a, b) = (
        clients(&group, Duration::from_secs(30)).await,
        clients(&group, Duration::from_secs(30)).await,
    );
    let (first, second) = (redlock(&a, "shared"), redlock(&b, "shared"));
    assert_eq!(first.quorum(), 3);

    let guard = first.lock().await.unwrap();
    assert_eq!(held_on(&group, "shared", &[true; 5]).await, [true; 5]);
    // The last masters join the guard just after their replies land.
    assert_eq!(
        settles_to(5, GENEROUS, || async { guard.held_on() }).await,
        5
    );
    // The same owner field on every master.
    for server in &group.servers {
        let hash = lock_hash(&mut server.raw().await, "shared").await;
        assert_eq!(hash.get(guard.owner()), Some(&1), "{hash:?}");
    }
    assert!(second.try_lock().await.unwrap().is_none());
    assert!(second
        .try_lock_for(Duration::from_millis(200))
        .await
        .unwrap()
        .is_none());

    guard.unlock().await.unwrap();
    assert_eq!(held_on(&group, "shared", &[false; 5]).await, [false; 5]);
    let guard = second.lock().await.unwrap();
    assert!(first.try_lock().await.unwrap().is_none());
    guard.unlock().await.unwrap();
    assert_eq!(held_on(&group, "shared", &[false; 5]).await, [false; 5]);
}

#[tokio::test]
async fn a_waiting_group_is_woken_by_the_unlock() {
    let group = RedisGroup::start(5);
    let (a, b) = (
        clients(&group, Duration::from_secs(30)).await,
        clients(&group, Duration::from_secs(30)).await,
    );
    let held = redlock(&a, "wake").lock().await.unwrap();
    let waiting = redlock(&b, "wake");
    let waiter = Waiting::spawn(async move { waiting.lock().await.unwrap() });
    // It listens on the masters that answered it busy: a round stops once its outcome is
    // decided, so at least a majority.
    let subscribed = settles_to(true, GENEROUS, || {
        let b = b.clone();
        async move {
            b.iter()
                .filter(|c| c.status().subscribed_channels == 1)
                .count()
                >= 3
        }
    })
    .await;
    assert!(subscribed);

    let woken = waiter
        .woken_by(async { held.unlock().await.unwrap() })
        .await;
    // The lease is 30 s: only the unlock messages explain this.
    assert!(
        woken.after < Duration::from_millis(500),
        "{:?}",
        woken.after
    );
    woken.value.unlock().await.unwrap();
}

#[tokio::test]
async fn a_group_waits_for_the_holders_unlock_without_polling() {
    let group = RedisGroup::start(3);
    let a = clients(&group, Duration::from_secs(30)).await;
    let rival = clients(&group, Duration::from_secs(30)).await;
    // A rival owner holds the lock on two of three masters: a majority the group cannot
    // beat, while the third master grants it every time it asks.
    let blockers = [
        rival[1].lock("held").lock().await.unwrap(),
        rival[2].lock("held").lock().await.unwrap(),
    ];
    let before = script_calls(&group.servers[0]);
    assert!(redlock(&a, "held")
        .try_lock_for(Duration::from_secs(2))
        .await
        .unwrap()
        .is_none());
    let calls = script_calls(&group.servers[0]) - before;
    // A round is an acquire and a rollback; a group woken by its own rollback would poll.
    assert!(calls <= 8, "{calls} script calls on the free master in 2 s");

    // The same for a MultiLock whose second lock is held elsewhere.
    let server = &group.servers[0];
    let other = testkit::client(server).await;
    let blocker = other.lock("b").lock().await.unwrap();
    let multi = MultiLock::new(vec![a[0].lock("a"), a[0].lock("b")]);
    let before = script_calls(server);
    assert!(multi
        .try_lock_for(Duration::from_secs(2))
        .await
        .unwrap()
        .is_none());
    let calls = script_calls(server) - before;
    assert!(calls <= 12, "{calls} script calls in 2 s");
    drop((blockers, blocker));
}

#[tokio::test]
async fn a_redlock_is_reentrant_on_every_master() {
    let group = RedisGroup::start(5);
    let a = clients(&group, Duration::from_secs(30)).await;
    let lock = redlock(&a, "nested");
    let outer = lock.lock().await.unwrap();
    let inner = lock.lock().await.unwrap();
    // Each call returns at the majority; the other masters' answers join in the background.
    for server in &group.servers {
        let conn = server.raw().await;
        let count = settles_to(Some(2), GENEROUS, || {
            let mut conn = conn.clone();
            let owner = outer.owner().to_string();
            async move { lock_hash(&mut conn, "nested").await.get(&owner).copied() }
        })
        .await;
        assert_eq!(count, Some(2), "re-entered on every master");
    }
    inner.unlock().await.unwrap();
    assert_eq!(held_on(&group, "nested", &[true; 5]).await, [true; 5]);
    outer.unlock().await.unwrap();
    assert_eq!(held_on(&group, "nested", &[false; 5]).await, [false; 5]);
}

#[tokio::test]
async fn the_watchdog_keeps_a_redlock_for_several_leases() {
    let group = RedisGroup::start(5);
    let a = clients(&group, Duration::from_secs(1)).await;
    let guard = redlock(&a, "long").lock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    for server in &group.servers {
        let ttl = pttl(&mut server.raw().await, "long").await;
        assert!(ttl > 0 && ttl <= 1_000, "renewed lease, got pttl {ttl}");
    }
    assert!(!guard.is_lost());
    assert!(guard.valid_until() > std::time::Instant::now());
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn an_unlock_returns_once_a_majority_has_released() {
    let group = RedisGroup::start(5);
    let a = clients(&group, Duration::from_secs(30)).await;
    let rival = clients(&group, Duration::from_secs(30)).await;
    let guard = redlock(&a, "early").lock().await.unwrap();
    assert_eq!(held_on(&group, "early", &[true; 5]).await, [true; 5]);
    group.servers[3].freeze();
    group.servers[4].freeze();
    let started = Instant::now();
    guard.unlock().await.unwrap();
    let took = started.elapsed();
    // Waiting for the frozen two would take their response timeout (1 s) at least.
    assert!(took < Duration::from_millis(700), "unlock took {took:?}");
    for server in &group.servers[..3] {
        assert!(lock_hash(&mut server.raw().await, "early").await.is_empty());
    }
    let taken = redlock(&rival, "early")
        .with_node_timeout(Duration::from_millis(200))
        .try_lock()
        .await
        .unwrap()
        .expect("free on the majority that released");
    group.servers[3].thaw();
    group.servers[4].thaw();
    taken.unlock().await.unwrap();
    assert_eq!(held_on(&group, "early", &[false; 5]).await, [false; 5]);
}
