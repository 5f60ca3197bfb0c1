//! RedLock with masters killed, frozen or restarted empty: a minority down or frozen does
//! not stop or slow acquisition, a majority down fails in bounded time with nothing left
//! behind, a master restarted empty does not let a rival in, a majority deleted behind the
//! holder's back is reported as the quorum lost, an attempt abandoned on frozen masters
//! never shortens a later hold, and masters that answer only after the unlock end up free.

use std::time::{Duration, Instant};

use redis_rlock::{LostReason, RedLock};
use testkit::group::{clients, held_on, redlock};
use testkit::{pttl, settles_to, RedisGroup};

const GENEROUS: Duration = Duration::from_secs(5);

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
    // Renewed every 2 s: a loaded machine starving the client for a round or two does not
    // let the lease run out on the masters that still hold it.
    let (a, b) = (
        clients(&group, Duration::from_secs(6)).await,
        clients(&group, Duration::from_secs(6)).await,
    );
    let guard = redlock(&a, "amnesia").lock().await.unwrap();
    // The lock returns at the majority; the last masters join it later. One whose acquire
    // is still on its way when it restarts gets it retried there, and holds it after all.
    assert_eq!(
        settles_to(5, GENEROUS, || async { guard.held_on() }).await,
        5
    );
    group.servers[1].restart();
    let rival = redlock(&b, "amnesia");
    assert!(rival
        .try_lock_for(Duration::from_millis(1_500))
        .await
        .unwrap()
        .is_none());
    // The restarted master's renewal finds the lock gone there: four of five hold it.
    assert_eq!(
        settles_to(4, Duration::from_secs(10), || async { guard.held_on() }).await,
        4,
        "the renewal on the restarted master"
    );
    assert!(!guard.is_lost(), "four of five still hold it");
    // The restarted master forgot the lock and the rival's grant there was taken back.
    let expected = [true, false, true, true, true];
    assert_eq!(held_on(&group, "amnesia", &expected).await, expected);
    guard.unlock().await.unwrap();
    assert!(rival.try_lock().await.unwrap().is_some());
}

#[tokio::test]
async fn a_redlock_whose_majority_is_gone_reports_the_quorum_lost() {
    let group = RedisGroup::start(5);
    let a = clients(&group, Duration::from_secs(1)).await;
    let guard = redlock(&a, "gone").lock().await.unwrap();
    // The lock returns at the majority; the last two masters join it later. Deleted before
    // they answer, the key would come back there and leave a majority standing.
    assert_eq!(
        settles_to(5, GENEROUS, || async { guard.held_on() }).await,
        5
    );
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
