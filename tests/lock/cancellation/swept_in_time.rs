//! The cancel point swept in time: calls cancelled after 0, 1, 2, ... steps of tens of
//! microseconds, on a free lock and while a rival lets go, never leave a lock held.

use std::time::Duration;

use testkit::{eventually, settles_to};

use super::any_lock::AnyLock;
use super::axes::{Entry, Kind, Point, Redis, WAITING_ENTRIES};
use super::scene::Scene;
use super::{GENEROUS, SETTLE};

/// Calls of `kind` over `masters` masters cancelled after every delay from 0 to
/// `rounds × step`, on a free lock and while a rival holds it and releases it: some are
/// dropped with a script in flight (in a group: in the fan-out, with stragglers out, in the
/// rollback), some while subscribing or waiting, some as they take the lock. Anything a
/// cancelled call took is released in the background right away; the lease (30 s) would
/// be far slower.
async fn sweep(kind: Kind, masters: usize, rounds: u32, step: Duration) {
    let scene = Scene::with_masters(kind, Redis::Up, masters).await;
    let response_timeout = Redis::Up.response_timeout(Point::Waiting);
    let (waiters, rivals) = (
        scene.clients(response_timeout).await,
        scene.clients(response_timeout).await,
    );
    let (lock, rival) = (
        AnyLock::new(kind, &waiters, "racy"),
        AnyLock::new(kind, &rivals, "racy"),
    );
    for round in 0..rounds {
        let held = if round % 2 == 0 {
            // Bounded: a place a cancelled call left at the head of a fair queue would
            // hold the rival off until its deadline.
            let taken = tokio::time::timeout(GENEROUS, rival.call(Entry::Lock)).await;
            Some(taken.expect("the rival got the lock").unwrap().unwrap())
        } else {
            None
        };
        let releaser = held.map(|guard| tokio::spawn(async move { guard.unlock().await }));
        let entry = WAITING_ENTRIES[(round / 2) as usize % WAITING_ENTRIES.len()];
        if let Ok(outcome) = tokio::time::timeout(step * round, lock.call(entry)).await {
            if let Some(guard) = outcome.unwrap() {
                guard.unlock().await.unwrap();
            }
        }
        if let Some(releaser) = releaser {
            releaser.await.unwrap().unwrap();
        }
    }
    let left = settles_to(Vec::new(), SETTLE, || scene.keys_of("racy")).await;
    assert!(
        left.is_empty(),
        "a cancelled call left the lock held: {left:?}"
    );
    for client in &waiters {
        assert_eq!(client.status().subscribed_channels, 0);
        assert_eq!(client.status().queued_waiters, 0);
    }
    eventually("no hold tracked", SETTLE, || {
        waiters.iter().all(|c| c.status().held_locks == 0)
    })
    .await;
}

#[tokio::test]
async fn rlock_calls_cancelled_at_any_point_never_leave_the_lock_held() {
    sweep(Kind::RLock, 1, 60, Duration::from_micros(50)).await;
}

#[tokio::test]
async fn fair_lock_calls_cancelled_at_any_point_never_leave_the_lock_held_or_a_place() {
    sweep(Kind::FairLock, 1, 60, Duration::from_micros(50)).await;
}

#[tokio::test]
async fn fenced_lock_calls_cancelled_at_any_point_never_leave_the_lock_held() {
    sweep(Kind::FencedLock, 1, 60, Duration::from_micros(50)).await;
}

/// A round over five masters is ~0.5 ms here: steps of 20 µs.
#[tokio::test]
async fn redlock_calls_cancelled_at_any_point_never_leave_a_lock_held() {
    sweep(Kind::RedLock, 5, 150, Duration::from_micros(20)).await;
}

#[tokio::test]
async fn multilock_calls_cancelled_at_any_point_never_leave_a_lock_held() {
    sweep(Kind::MultiLock, 2, 150, Duration::from_micros(20)).await;
}
