//! RedLock over five independent masters, and MultiLock: exclusion, a minority of nodes
//! killed, frozen or restarted empty, a majority down, the watchdog, the quorum lost,
//! reentrancy, waking on unlock, and all-or-nothing rollback.

use std::time::{Duration, Instant};

use redis_rlock::{Client, LostReason, MultiLock, RedLock};
use testkit::{client_with_watchdog, lock_hash, pttl, settles_to, RedisGroup, RedisServer};

const GENEROUS: Duration = Duration::from_secs(5);
/// Per-node timeout for tests that are not about it: roomy on a loaded 2-core machine.
const NODE_TIMEOUT: Duration = Duration::from_millis(500);

/// One client per master.
async fn clients(group: &RedisGroup, watchdog: Duration) -> Vec<Client> {
    let mut clients = Vec::new();
    for server in &group.servers {
        clients.push(client_with_watchdog(server, watchdog).await);
    }
    clients
}

fn redlock(clients: &[Client], name: &str) -> RedLock {
    RedLock::new(clients.iter().map(|c| c.lock(name)).collect()).with_node_timeout(NODE_TIMEOUT)
}

/// Whether each server holds `key`, read until it settles to `expected` (background
/// releases land shortly after the call that started them).
async fn held_on(group: &RedisGroup, key: &str, expected: &[bool]) -> Vec<bool> {
    let mut held = Vec::new();
    for (server, expected) in group.servers.iter().zip(expected) {
        if !server.is_running() {
            held.push(*expected);
            continue;
        }
        let raw = server.raw().await;
        let exists = settles_to(*expected, GENEROUS, || {
            let mut raw = raw.clone();
            async move {
                redis::cmd("EXISTS")
                    .arg(key)
                    .query_async::<i64>(&mut raw)
                    .await
                    .unwrap()
                    == 1
            }
        })
        .await;
        held.push(exists);
    }
    held
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
    assert_eq!(guard.held_on(), 5);
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
    let waiter = tokio::spawn(async move {
        let guard = waiting.lock().await.unwrap();
        (Instant::now(), guard)
    });
    // It listens on the masters that answered it busy: a round stops once its outcome is
    // decided, so at least a majority.
    let subscribed = settles_to(true, GENEROUS, || {
        let b = b.clone();
        async move {
            b.iter()
                .filter(|c| c.subscribed_channel_count() == 1)
                .count()
                >= 3
        }
    })
    .await;
    assert!(subscribed);

    let released = Instant::now();
    held.unlock().await.unwrap();
    let (acquired, guard) = tokio::time::timeout(GENEROUS, waiter)
        .await
        .unwrap()
        .unwrap();
    // The lease is 30 s: only the unlock messages explain this.
    assert!(acquired - released < Duration::from_millis(500));
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn with_two_masters_killed_the_lock_is_still_acquired() {
    let mut group = RedisGroup::start(5);
    let (a, b) = (
        clients(&group, Duration::from_secs(30)).await,
        clients(&group, Duration::from_secs(30)).await,
    );
    group.servers[0].kill();
    group.servers[3].kill();
    let guard = redlock(&a, "two-down").lock().await.unwrap();
    assert_eq!(guard.held_on(), 3);
    assert!(redlock(&b, "two-down").try_lock().await.unwrap().is_none());
    // Two masters cannot confirm the release; the majority did.
    guard.unlock().await.unwrap();
    let expected = [false; 5];
    assert_eq!(held_on(&group, "two-down", &expected).await, expected);
}

#[tokio::test]
async fn a_frozen_master_does_not_stall_acquisition() {
    let group = RedisGroup::start(5);
    let a = clients(&group, Duration::from_secs(30)).await;
    let lock = redlock(&a, "frozen").with_node_timeout(Duration::from_millis(300));
    group.servers[2].freeze();
    let started = Instant::now();
    let guard = lock.lock().await.unwrap();
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(300),
        "acquired in {took:?}: a majority answered without the frozen master"
    );
    assert!(guard.held_on() >= 3);
    // The fourth live master's answer, if it came after the quorum, joins the guard.
    let joined = settles_to(4, GENEROUS, || async { guard.held_on() }).await;
    assert_eq!(joined, 4);
    guard.unlock().await.unwrap();
    group.servers[2].thaw();
}

#[tokio::test]
async fn with_three_masters_down_acquisition_fails_in_bounded_time_and_leaves_nothing() {
    let mut group = RedisGroup::start(5);
    let a = clients(&group, Duration::from_secs(30)).await;
    for i in [0, 2, 4] {
        group.servers[i].kill();
    }
    let started = Instant::now();
    let err = tokio::time::timeout(Duration::from_secs(10), redlock(&a, "majority-down").lock())
        .await
        .expect("bounded")
        .unwrap_err();
    assert!(
        matches!(
            err,
            redis_rlock::Error::QuorumUnreachable {
                needed: 3,
                total: 5,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.is_connection_error());
    assert!(started.elapsed() < GENEROUS, "{:?}", started.elapsed());
    // What the two live masters granted along the way was released.
    let expected = [false; 5];
    assert_eq!(held_on(&group, "majority-down", &expected).await, expected);
}

#[tokio::test]
async fn a_master_restarted_empty_does_not_let_a_second_group_in() {
    let mut group = RedisGroup::start(5);
    let (a, b) = (
        clients(&group, Duration::from_secs(3)).await,
        clients(&group, Duration::from_secs(3)).await,
    );
    let guard = redlock(&a, "amnesia").lock().await.unwrap();
    group.servers[1].restart();
    let rival = redlock(&b, "amnesia");
    assert!(rival
        .try_lock_for(Duration::from_millis(1_500))
        .await
        .unwrap()
        .is_none());
    assert!(!guard.is_lost(), "four of five still hold it");
    // The restarted master forgot the lock and the rival's grant there was taken back.
    let expected = [true, false, true, true, true];
    assert_eq!(held_on(&group, "amnesia", &expected).await, expected);
    guard.unlock().await.unwrap();
    assert!(rival.try_lock().await.unwrap().is_some());
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
async fn a_redlock_whose_majority_is_gone_reports_the_quorum_lost() {
    let group = RedisGroup::start(5);
    let a = clients(&group, Duration::from_secs(1)).await;
    let guard = redlock(&a, "gone").lock().await.unwrap();
    let lost = guard.lost();
    // Deleted behind its back on three masters: the renewals find the owner gone.
    for server in &group.servers[..3] {
        let _: i64 = redis::cmd("DEL")
            .arg("gone")
            .query_async(&mut server.raw().await)
            .await
            .unwrap();
    }
    let reason = tokio::time::timeout(GENEROUS, lost).await.unwrap();
    assert_eq!(reason, LostReason::QuorumLost);
    assert!(guard.is_lost());
    let err = guard.unlock().await.unwrap_err();
    assert_eq!(err.lost_reason(), Some(LostReason::QuorumLost), "{err}");
    // The two masters that still held it were released all the same.
    let expected = [false; 5];
    assert_eq!(held_on(&group, "gone", &expected).await, expected);
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
async fn a_multilock_rolls_back_while_one_lock_is_held_elsewhere() {
    let group = RedisGroup::start(2);
    let (one, two) = (
        testkit::client(&group.servers[0]).await,
        testkit::client(&group.servers[1]).await,
    );
    let other = testkit::client(&group.servers[1]).await;
    let multi = MultiLock::new(vec![one.lock("a"), two.lock("b"), one.lock("c")])
        .with_node_timeout(NODE_TIMEOUT);
    assert_eq!(multi.quorum(), 3);
    let blocker = other.lock("b").lock().await.unwrap();

    assert!(multi
        .try_lock_for(Duration::from_millis(300))
        .await
        .unwrap()
        .is_none());
    let (mut first, mut second) = (group.servers[0].raw().await, group.servers[1].raw().await);
    assert!(lock_hash(&mut first, "a").await.is_empty());
    assert!(lock_hash(&mut first, "c").await.is_empty());

    let waiting = multi.clone();
    let waiter = tokio::spawn(async move { waiting.lock().await.unwrap() });
    // It listens where only an unlock can let it in: b's master. (Which other locks answer
    // before b is decided in a round depends on timing; it never needs their unlocks.)
    let subscribed = settles_to(true, GENEROUS, || {
        let two = two.clone();
        async move { two.subscribed_channel_count() == 1 }
    })
    .await;
    assert!(subscribed);
    // Waiting, it holds none of its locks (its last round may still be rolling back).
    for key in ["a", "c"] {
        let held = settles_to(false, GENEROUS, || {
            let mut raw = first.clone();
            async move { !lock_hash(&mut raw, key).await.is_empty() }
        })
        .await;
        assert!(!held, "{key} held while waiting");
    }

    let released = Instant::now();
    blocker.unlock().await.unwrap();
    let guard = tokio::time::timeout(GENEROUS, waiter)
        .await
        .unwrap()
        .unwrap();
    assert!(
        released.elapsed() < Duration::from_millis(500),
        "woken by b's unlock"
    );
    assert_eq!(guard.held_on(), 3);
    for (conn, key) in [(&first, "a"), (&second, "b"), (&first, "c")] {
        let hash = lock_hash(&mut conn.clone(), key).await;
        assert_eq!(hash.get(guard.owner()), Some(&1), "{key}: {hash:?}");
    }
    guard.unlock().await.unwrap();
    assert!(lock_hash(&mut second, "b").await.is_empty());
}

#[tokio::test]
async fn a_multilock_is_lost_when_any_lock_is() {
    let server = RedisServer::start();
    let client = client_with_watchdog(&server, Duration::from_secs(1)).await;
    let multi = MultiLock::new(vec![client.lock("x"), client.lock("y")]);
    let guard = multi.lock().await.unwrap();
    let lost = guard.lost();
    assert!(client.lock("y").force_unlock().await.unwrap());
    let reason = tokio::time::timeout(GENEROUS, lost).await.unwrap();
    assert_eq!(reason, LostReason::Released);
    let err = guard.unlock().await.unwrap_err();
    assert_eq!(err.lost_reason(), Some(LostReason::Released));
    assert!(!client.lock("x").is_locked().await.unwrap());
}

#[tokio::test]
async fn bad_group_input_is_refused_before_anything_is_sent() {
    let server = RedisServer::start();
    let client = testkit::client(&server).await;
    let empty = RedLock::new(Vec::<redis_rlock::RLock>::new());
    assert!(empty.lock().await.unwrap_err().is_invalid_argument());
    let unnamed = MultiLock::new(vec![client.lock("fine"), client.lock("")]);
    assert!(unnamed.try_lock().await.unwrap_err().is_invalid_argument());
    let lock = RedLock::new(vec![client.lock("fine")]);
    assert!(lock
        .clone()
        .with_node_timeout(Duration::ZERO)
        .lock()
        .await
        .unwrap_err()
        .is_invalid_argument());
    assert!(lock
        .lock_with_lease(Duration::ZERO)
        .await
        .unwrap_err()
        .is_invalid_argument());
    assert!(lock
        .try_lock_with(Duration::from_secs(1), Duration::MAX)
        .await
        .unwrap_err()
        .is_invalid_argument());
    let mut raw = server.raw().await;
    let keys: i64 = redis::cmd("DBSIZE").query_async(&mut raw).await.unwrap();
    assert_eq!(keys, 0, "nothing written");
}

#[tokio::test]
async fn group_calls_cancelled_at_any_point_never_leave_a_lock_held() {
    let group = RedisGroup::start(5);
    let (a, b) = (
        clients(&group, Duration::from_secs(30)).await,
        clients(&group, Duration::from_secs(30)).await,
    );
    let (lock, rival) = (redlock(&a, "racy"), redlock(&b, "racy"));
    // Cancel after every delay from 0 to ~3 ms (a round is ~0.5 ms here), on a free lock
    // and while a rival holds it and releases it: calls are dropped in the fan-out, with
    // stragglers out, in the rollback and in the wait.
    for round in 0..150u64 {
        let held = if round % 2 == 0 {
            Some(rival.lock().await.unwrap())
        } else {
            None
        };
        let releaser = held.map(|guard| tokio::spawn(async move { guard.unlock().await }));
        let cancel_after = Duration::from_micros(round * 20);
        if let Ok(guard) = tokio::time::timeout(cancel_after, lock.lock()).await {
            guard.unwrap().unlock().await.unwrap();
        }
        if let Some(releaser) = releaser {
            releaser.await.unwrap().unwrap();
        }
    }
    // Anything a cancelled call took is released in the background right away; the lease
    // (30 s) would be far slower.
    let expected = [false; 5];
    assert_eq!(held_on(&group, "racy", &expected).await, expected);
    for client in &a {
        assert_eq!(client.subscribed_channel_count(), 0);
    }
}

/// Script calls a server has run so far.
fn script_calls(server: &RedisServer) -> i64 {
    testkit::info_field(server, "commandstats", "cmdstat_evalsha", "calls")
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
async fn an_abandoned_attempt_never_shortens_a_later_hold() {
    let group = RedisGroup::start(3);
    let a = clients(&group, Duration::from_secs(30)).await;
    let rival = clients(&group, Duration::from_secs(30)).await;
    let lock = RedLock::new(a.iter().map(|c| c.lock("abandoned")).collect());
    // The first call gives up on two frozen masters; its attempts there run when they thaw,
    // and are undone then.
    group.servers[1].freeze();
    group.servers[2].freeze();
    let first = lock
        .clone()
        .with_node_timeout(Duration::from_millis(50))
        .try_lock_with(Duration::ZERO, Duration::from_secs(1))
        .await;
    assert!(
        matches!(&first, Err(e) if e.is_connection_error()),
        "two of three masters frozen: {first:?}"
    );
    group.servers[1].thaw();
    group.servers[2].thaw();
    // The same task at once takes the lock for a long lease: the late undo must neither
    // free it nor shorten its lease on any master.
    let guard = lock
        .with_node_timeout(Duration::from_secs(3))
        .lock_with_lease(Duration::from_secs(60))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    for server in &group.servers {
        let ttl = pttl(&mut server.raw().await, "abandoned").await;
        assert!(ttl > 50_000, "pttl {ttl} on a master after the undo");
    }
    assert!(!guard.is_lost());
    assert!(redlock(&rival, "abandoned")
        .try_lock()
        .await
        .unwrap()
        .is_none());
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn group_leases_too_short_to_use_and_shared_masters_are_refused() {
    let group = RedisGroup::start(3);
    let a = clients(&group, Duration::from_secs(30)).await;
    let lock = redlock(&a, "short").with_node_timeout(Duration::from_millis(100));
    for lease in [Duration::from_millis(2), Duration::from_millis(100)] {
        let err = lock.lock_with_lease(lease).await.unwrap_err();
        assert!(err.is_invalid_argument(), "{lease:?}: {err}");
    }
    assert!(lock
        .try_lock_with(Duration::ZERO, Duration::from_millis(300))
        .await
        .unwrap()
        .is_some());
    let twice = RedLock::new(vec![a[0].lock("k"), a[1].lock("k"), a[0].lock("k")]);
    assert!(twice.try_lock().await.unwrap_err().is_invalid_argument());
    let same_master = client_with_watchdog(&group.servers[0], Duration::from_secs(30)).await;
    let aliased = RedLock::new(vec![a[0].lock("k"), same_master.lock("k"), a[1].lock("k")]);
    assert!(aliased.try_lock().await.unwrap_err().is_invalid_argument());
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

#[tokio::test]
async fn masters_that_answer_after_the_unlock_are_released_too() {
    let group = RedisGroup::start(5);
    let a = clients(&group, Duration::from_secs(30)).await;
    group.servers[3].freeze();
    group.servers[4].freeze();
    // Long enough for the frozen two to answer late rather than fail.
    let lock = redlock(&a, "late").with_node_timeout(Duration::from_millis(900));
    let guard = lock.lock().await.unwrap();
    assert_eq!(guard.held_on(), 3, "returned at the majority");
    guard.unlock().await.unwrap();
    // Their acquires, answered now, find the guard released.
    group.servers[3].thaw();
    group.servers[4].thaw();
    assert_eq!(held_on(&group, "late", &[false; 5]).await, [false; 5]);
    let rival = clients(&group, Duration::from_secs(30)).await;
    let all = redlock(&rival, "late")
        .try_lock()
        .await
        .unwrap()
        .expect("free everywhere");
    assert_eq!(held_on(&group, "late", &[true; 5]).await, [true; 5]);
    all.unlock().await.unwrap();
    assert_eq!(held_on(&group, "late", &[false; 5]).await, [false; 5]);
}
