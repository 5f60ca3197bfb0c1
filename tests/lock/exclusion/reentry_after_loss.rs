//! A re-entry after an unnoticed loss.
//!
//! The task holds `g1`; the lock leaves Redis before the client notices (a force unlock by
//! another client, or a restart without persistence); another client may take it meanwhile.
//! The task then takes the lock again. Redis makes the owner's field anew, so `g1` is lost:
//! it must say so at once, and `g2` is a hold of its own whose release never leaves `g1`
//! looking valid while the lock is free. Likewise a lost guard that is dropped never frees
//! the hold taken after it.

use std::time::Duration;

use redis_rlock::{Client, Lock, LockKind, LostReason};
use testkit::{client, RedisServer};

/// `make(client)` gives the lock under test on `client`; `rival(client)` the lock another
/// client takes meanwhile (for a read lock, the write side: a writer is the rival).
async fn a_reentry_after_a_force_unlock_tells_the_first_guard<K: LockKind, R: LockKind>(
    make: impl Fn(&Client) -> Lock<K>,
    rival: impl Fn(&Client) -> Lock<R>,
    fixed_lease: bool,
) {
    let server = RedisServer::start();
    let (mine, other) = (client(&server).await, client(&server).await);
    let lock = make(&mine);
    let g1 = if fixed_lease {
        lock.lock_with_lease(Duration::from_secs(30)).await.unwrap()
    } else {
        lock.lock().await.unwrap()
    };
    let lost = g1.lost();
    assert!(make(&other).force_unlock().await.unwrap());
    let theirs = testkit::bounded("the rival's lock()", rival(&other).lock())
        .await
        .unwrap();
    theirs.unlock().await.unwrap();

    let g2 = testkit::bounded("the re-entry", lock.lock()).await.unwrap();
    assert!(g1.is_lost(), "the first guard's hold left Redis before g2");
    let told = tokio::time::timeout(Duration::from_secs(1), lost).await;
    assert_eq!(told, Ok(LostReason::Released), "lost() resolves at once");
    assert!(!g2.is_lost());
    assert_eq!(lock.hold_count().await.unwrap(), 1, "one count, g2's");

    g2.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap(), "g2 was the only hold");
    let third = client(&server).await;
    let theirs = rival(&third).try_lock().await.unwrap();
    assert!(theirs.is_some(), "the lock is free for anyone");
    let err = g1.unlock().await.unwrap_err();
    assert!(err.is_lock_lost(), "{err}");
    assert!(
        rival(&third).is_locked().await.unwrap(),
        "g1's unlock leaves the third client's hold alone"
    );
}

#[tokio::test]
async fn rlock_reentry_after_a_force_unlock_reports_the_loss() {
    a_reentry_after_a_force_unlock_tells_the_first_guard(|c| c.lock("l"), |c| c.lock("l"), false)
        .await;
}

#[tokio::test]
async fn rlock_fixed_lease_reentry_after_a_force_unlock_reports_the_loss() {
    a_reentry_after_a_force_unlock_tells_the_first_guard(|c| c.lock("l"), |c| c.lock("l"), true)
        .await;
}

#[tokio::test]
async fn fair_reentry_after_a_force_unlock_reports_the_loss() {
    a_reentry_after_a_force_unlock_tells_the_first_guard(
        |c| c.fair_lock("l"),
        |c| c.fair_lock("l"),
        false,
    )
    .await;
}

#[tokio::test]
async fn fenced_reentry_after_a_force_unlock_reports_the_loss() {
    a_reentry_after_a_force_unlock_tells_the_first_guard(
        |c| c.fenced_lock("l"),
        |c| c.fenced_lock("l"),
        false,
    )
    .await;
}

#[tokio::test]
async fn write_reentry_after_a_force_unlock_reports_the_loss() {
    a_reentry_after_a_force_unlock_tells_the_first_guard(
        |c| c.read_write_lock("l").write_lock(),
        |c| c.read_write_lock("l").write_lock(),
        false,
    )
    .await;
}

#[tokio::test]
async fn read_reentry_after_a_force_unlock_reports_the_loss() {
    a_reentry_after_a_force_unlock_tells_the_first_guard(
        |c| c.read_write_lock("l").read_lock(),
        |c| c.read_write_lock("l").write_lock(),
        false,
    )
    .await;
}

/// After Redis restarted empty, a re-entry finds no field: the first guard is lost by the
/// time the second is handed out, whether or not the reconnect's renewal round got there
/// first (a race: the issue saw it hidden in 5 of 11 runs, so each kind tries 3 times).
async fn a_reentry_after_a_restart_tells_the_first_guard<K: LockKind>(
    make: impl Fn(&Client) -> Lock<K>,
) {
    let mut server = RedisServer::start();
    let mine = client(&server).await;
    let lock = make(&mine);
    for round in 0..3 {
        let g1 = lock.lock().await.unwrap();
        server.restart();
        // A re-entry that meets the broken connection may have run, so it is not sent
        // again (it could count twice): the caller sees the error and tries again.
        let mut tries = 0;
        let g2 = loop {
            tries += 1;
            match testkit::bounded("the re-entry", lock.lock()).await {
                Err(e) if e.is_connection_error() && tries < 5 => continue,
                outcome => break outcome.unwrap(),
            }
        };
        assert!(g1.is_lost(), "round {round}: g1 still looks valid");
        assert_eq!(
            tokio::time::timeout(Duration::from_secs(1), g1.lost()).await,
            Ok(LostReason::Released),
            "round {round}"
        );
        assert!(!g2.is_lost());
        assert_eq!(lock.hold_count().await.unwrap(), 1, "round {round}");
        g2.unlock().await.unwrap();
        assert!(!lock.is_locked().await.unwrap(), "round {round}");
        assert!(g1.unlock().await.unwrap_err().is_lock_lost());
    }
}

#[tokio::test]
async fn reentries_after_a_restart_report_the_loss_for_every_kind() {
    a_reentry_after_a_restart_tells_the_first_guard(|c| c.lock("l")).await;
    a_reentry_after_a_restart_tells_the_first_guard(|c| c.fair_lock("l")).await;
    a_reentry_after_a_restart_tells_the_first_guard(|c| c.fenced_lock("l")).await;
    a_reentry_after_a_restart_tells_the_first_guard(|c| c.read_write_lock("l").write_lock()).await;
    a_reentry_after_a_restart_tells_the_first_guard(|c| c.read_write_lock("l").read_lock()).await;
}

/// Redis counting fewer holds than the guards (a count taken away behind the client's back):
/// a release that frees the lock leaves no other guard of the hold looking valid.
#[tokio::test]
async fn a_release_that_frees_the_lock_marks_the_remaining_guards_lost() {
    let server = RedisServer::start();
    let mine = client(&server).await;
    let lock = mine.lock("l");
    let outer = lock.lock().await.unwrap();
    let inner = lock.lock().await.unwrap();
    let mut raw = server.raw().await;
    let _: () = redis::cmd("HSET")
        .arg(outer.key())
        .arg(outer.owner())
        .arg(1)
        .query_async(&mut raw)
        .await
        .unwrap();
    inner.unlock().await.unwrap();
    assert!(
        !lock.is_locked().await.unwrap(),
        "the release freed the lock"
    );
    assert!(outer.is_lost(), "the outer guard must not look valid");
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(1), outer.lost()).await,
        Ok(LostReason::Released)
    );
}

/// A guard whose lock was force-unlocked behind its back is dropped, and the same task takes
/// the lock again at once: the dropped guard's background release must not take the new
/// hold's count (it would free the lock under the new guard). The two go out through
/// separate batches, so the acquire waits for the release to be answered.
async fn a_dropped_lost_guard_never_frees_the_next_hold<K: LockKind, R: LockKind>(
    make: impl Fn(&Client) -> Lock<K>,
    rival: impl Fn(&Client) -> Lock<R>,
) {
    let server = RedisServer::start();
    let (mine, other) = (client(&server).await, client(&server).await);
    let lock = make(&mine);
    for round in 0..5 {
        let g1 = lock.lock().await.unwrap();
        assert!(make(&other).force_unlock().await.unwrap());
        drop(g1);
        let g2 = lock.lock().await.unwrap();
        // Whatever the background release did, it has been answered by now (the acquire
        // waited for it): the lock must still be g2's.
        assert!(!g2.is_lost(), "round {round}");
        assert_eq!(lock.hold_count().await.unwrap(), 1, "round {round}");
        assert!(
            rival(&other).try_lock().await.unwrap().is_none(),
            "round {round}: another client got in under g2"
        );
        g2.unlock().await.unwrap();
    }
}

#[tokio::test]
async fn a_dropped_lost_guard_never_frees_the_next_hold_of_any_kind() {
    let write = |c: &Client| c.read_write_lock("l").write_lock();
    a_dropped_lost_guard_never_frees_the_next_hold(|c| c.lock("l"), |c| c.lock("l")).await;
    a_dropped_lost_guard_never_frees_the_next_hold(|c| c.fair_lock("l"), |c| c.fair_lock("l"))
        .await;
    a_dropped_lost_guard_never_frees_the_next_hold(|c| c.fenced_lock("l"), |c| c.fenced_lock("l"))
        .await;
    a_dropped_lost_guard_never_frees_the_next_hold(write, write).await;
    // A reader's rival is a writer: readers share.
    a_dropped_lost_guard_never_frees_the_next_hold(|c| c.read_write_lock("l").read_lock(), write)
        .await;
}
