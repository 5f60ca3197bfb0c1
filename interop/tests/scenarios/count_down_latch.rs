//! RCountDownLatch shared by Redisson and this crate, each scenario both ways: a count set
//! on one side seen (and not set again) on the other; counted down across, as raw `GET`
//! sees it; waiters of one side released by the other side's last count-down within
//! 500 ms, and none before it.

use std::time::Duration;

use redis_rlock::protocol::layout;
use redis_rlock_interop::check::{report_wake_ups, WAKE_BOUND};
use redis_rlock_interop::synchronizers::{call, raw_count, start, SyncKind};
use redis_rlock_interop::view::subscribers_become;
use redis_rlock_interop::{now_us, Redisson};
use testkit::RedisServer;

use super::ms;

const GENEROUS: Duration = Duration::from_secs(10);
const ROUNDS: usize = 5;
const LATCH: SyncKind = SyncKind::Latch;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_are_set_and_counted_down_across() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let java = Redisson::start_default(server.url()).await;
    let rust = testkit::client(&server).await;
    let t1 = java.thread("t1");

    // Set by Rust: Java sees it, cannot set it again, counts it down.
    let latch = rust.count_down_latch("batch:rust-set");
    assert!(latch.try_set_count(3).await.unwrap());
    assert!(!call(&t1, LATCH, "trysetcount", "batch:rust-set", &["9"])
        .await
        .bool());
    assert_eq!(
        call(&t1, LATCH, "count", "batch:rust-set", &[]).await.int(),
        3
    );
    call(&t1, LATCH, "countdown", "batch:rust-set", &[])
        .await
        .ok();
    assert_eq!(latch.count().await.unwrap(), 2);
    latch.count_down().await.unwrap();
    assert_eq!(
        call(&t1, LATCH, "count", "batch:rust-set", &[]).await.int(),
        1
    );
    assert_eq!(
        raw_count(&mut raw, "batch:rust-set").await.as_deref(),
        Some("1")
    );
    call(&t1, LATCH, "countdown", "batch:rust-set", &[])
        .await
        .ok();
    assert_eq!(
        raw_count(&mut raw, "batch:rust-set").await,
        None,
        "open: deleted"
    );
    assert!(latch.wait_for(Duration::ZERO).await.unwrap());
    assert!(call(&t1, LATCH, "awaitfor", "batch:rust-set", &["0"])
        .await
        .bool());

    // Set by Java: Rust sees it, cannot set it again, counts it down.
    let latch = rust.count_down_latch("batch:java-set");
    assert!(call(&t1, LATCH, "trysetcount", "batch:java-set", &["2"])
        .await
        .bool());
    assert!(!latch.try_set_count(5).await.unwrap());
    assert_eq!(latch.count().await.unwrap(), 2);
    latch.count_down().await.unwrap();
    assert_eq!(
        call(&t1, LATCH, "count", "batch:java-set", &[]).await.int(),
        1
    );
    assert!(!latch.wait_for(Duration::from_millis(50)).await.unwrap());
    latch.count_down().await.unwrap();
    assert_eq!(
        call(&t1, LATCH, "count", "batch:java-set", &[]).await.int(),
        0
    );
    assert!(call(&t1, LATCH, "trysetcount", "batch:java-set", &["1"])
        .await
        .bool());
    assert!(latch.delete().await.unwrap());
    assert!(!call(&t1, LATCH, "delete", "batch:java-set", &[])
        .await
        .bool());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_count_down_opens_the_latch_for_rust_waiters_within_500_ms() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let java = Redisson::start_default(server.url()).await;
    let rust = testkit::client(&server).await;
    let t1 = java.thread("t1");
    let name = "gate:java-to-rust";
    let channel = layout::latch_channel(name);

    let mut latencies = Vec::new();
    for _ in 0..ROUNDS {
        assert!(call(&t1, LATCH, "trysetcount", name, &["2"]).await.bool());
        subscribers_become(&raw, &channel, 0, GENEROUS).await;
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let latch = rust.count_down_latch(name);
                tokio::spawn(async move {
                    latch.wait().await.expect("Rust wait");
                    now_us()
                })
            })
            .collect();
        subscribers_become(&raw, &channel, 1, GENEROUS).await;
        call(&t1, LATCH, "countdown", name, &[]).await.ok();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(waiters.iter().all(|w| !w.is_finished()), "opened at 1");
        let opened = call(&t1, LATCH, "countdown", name, &[]).await.ok();
        for waiter in waiters {
            let woken_us = tokio::time::timeout(GENEROUS, waiter)
                .await
                .expect("a Rust waiter")
                .unwrap();
            latencies.push(ms(woken_us - opened.start_us));
        }
    }
    report_wake_ups("latch.wake_up.java_count_down_to_rust_ms", &latencies);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_count_down_opens_the_latch_for_java_waiters_within_500_ms() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let java = Redisson::start_default(server.url()).await;
    let rust = testkit::client(&server).await;
    let threads = [java.thread("t1"), java.thread("t2")];
    let name = "gate:rust-to-java";
    let channel = layout::latch_channel(name);
    let latch = rust.count_down_latch(name);

    let mut latencies = Vec::new();
    for _ in 0..ROUNDS {
        assert!(latch.try_set_count(2).await.unwrap());
        subscribers_become(&raw, &channel, 0, GENEROUS).await;
        let mut waiting = Vec::new();
        for thread in &threads {
            waiting.push(start(thread, LATCH, "await", name, &[]).await);
        }
        // One subscription for the JVM, shared by its waiting threads.
        subscribers_become(&raw, &channel, 1, GENEROUS).await;
        latch.count_down().await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        for waiter in &mut waiting {
            assert!(waiter.try_now().is_none(), "opened at 1");
        }
        let opened_us = now_us();
        latch.count_down().await.unwrap();
        for waiter in waiting {
            let reply = waiter.wait().await.ok();
            latencies.push(ms(reply.end_us - opened_us));
        }
    }
    report_wake_ups("latch.wake_up.rust_count_down_to_java_ms", &latencies);
}

/// A latch deleted while both sides wait on it: Redisson's `delete()` publishes `1` ("a new
/// count"), on which Redisson's waiters close their local latch and wait for the next
/// zero; this crate's waiters read the count again on any message of the latch, find 0
/// (no key) and return. Returns whether the Rust waiter was still waiting 500 ms after the
/// delete; the Java waiter always is, and is let go by a new count counted down.
async fn a_delete_while_both_sides_wait(java_deletes: bool) -> bool {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let java = Redisson::start_default(server.url()).await;
    let rust = testkit::client(&server).await;
    let (t1, t2) = (java.thread("t1"), java.thread("t2"));
    let (name, channel) = ("gate:deleted", layout::latch_channel("gate:deleted"));
    let latch = rust.count_down_latch(name);
    assert!(latch.try_set_count(1).await.unwrap());
    let mut java_waiter = start(&t1, LATCH, "await", name, &[]).await;
    let rust_waiter = {
        let latch = latch.clone();
        tokio::spawn(async move { latch.wait().await })
    };
    subscribers_become(&raw, &channel, 2, GENEROUS).await;
    // Redisson's `await()` reads the count once more after its subscription, before it
    // blocks: no event shows that it got there, so it is given a moment (a delete before it
    // would let it go, as a count of 0 does).
    tokio::time::sleep(Duration::from_millis(300)).await;

    if java_deletes {
        assert!(call(&t2, LATCH, "delete", name, &[]).await.bool());
    } else {
        assert!(latch.delete().await.unwrap());
    }
    tokio::time::sleep(WAKE_BOUND).await;
    let rust_waiting = !rust_waiter.is_finished();
    assert!(
        java_waiter.try_now().is_none(),
        "Redisson's waiter returned"
    );
    // A new count, counted down: Redisson's waiter goes.
    assert!(call(&t2, LATCH, "trysetcount", name, &["1"]).await.bool());
    call(&t2, LATCH, "countdown", name, &[]).await.ok();
    java_waiter.wait().await.ok();
    tokio::time::timeout(GENEROUS, rust_waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    rust_waiting
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_latch_lets_rust_waiters_go_while_redissons_wait_on() {
    assert!(!a_delete_while_both_sides_wait(true).await);
    assert!(!a_delete_while_both_sides_wait(false).await);
}

/// Difference S1 (see interop/README.md): Redisson's waiters on a latch that is deleted go on
/// waiting for its next zero, although a deleted latch's count reads 0 (its timed
/// `await` returns true at its timeout); this crate's waiters return at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "difference S1: a deleted latch lets Rust waiters go; Redisson's wait for the next zero"]
async fn waiters_wait_through_a_delete_as_redissons_do() {
    assert!(a_delete_while_both_sides_wait(true).await);
}
