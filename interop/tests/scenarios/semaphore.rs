//! RSemaphore shared by Redisson and this crate, each scenario both ways (Java takes and
//! Rust waits, and the reverse): permits set on one side seen and counted on the other, as
//! raw `GET` sees them; a waiter woken by the other side's release within 500 ms; permits
//! added and drained across.

use std::time::Duration;

use redis_rlock::protocol::layout::Derived;
use redis_rlock::SemaphoreGuard;
use redis_rlock_interop::check::report_wake_ups;
use redis_rlock_interop::synchronizers::{call, raw_count, start, SyncKind};
use redis_rlock_interop::view::subscribers_become;
use redis_rlock_interop::{now_us, Redisson};
use testkit::RedisServer;

use super::ms;

const GENEROUS: Duration = Duration::from_secs(10);
const ROUNDS: usize = 5;
const SEM: SyncKind = SyncKind::Semaphore;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_are_shared_and_counted_across() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let java = Redisson::start_default(server.url()).await;
    let rust = testkit::client(&server).await;
    let t1 = java.thread("t1");

    // Set by Rust, seen by Java; set once for both.
    let pool = rust.semaphore("pool:rust-set");
    assert!(pool.try_set_permits(5).await.unwrap());
    assert!(!call(&t1, SEM, "trysetpermits", "pool:rust-set", &["9"])
        .await
        .bool());
    assert_eq!(
        call(&t1, SEM, "available", "pool:rust-set", &[])
            .await
            .int(),
        5
    );
    assert!(call(&t1, SEM, "tryacquire", "pool:rust-set", &["2"])
        .await
        .bool());
    assert_eq!(
        raw_count(&mut raw, "pool:rust-set").await.as_deref(),
        Some("3")
    );
    assert_eq!(pool.available_permits().await.unwrap(), 3);
    let three = pool.acquire(3).await.unwrap();
    assert!(!call(&t1, SEM, "tryacquire", "pool:rust-set", &["1"])
        .await
        .bool());
    assert!(pool.try_acquire(1).await.unwrap().is_none());
    three.release().await.unwrap();
    assert_eq!(
        call(&t1, SEM, "available", "pool:rust-set", &[])
            .await
            .int(),
        3
    );
    call(&t1, SEM, "release", "pool:rust-set", &["2"])
        .await
        .ok();
    assert_eq!(pool.available_permits().await.unwrap(), 5);

    // Set by Java, seen by Rust.
    let other = rust.semaphore("pool:java-set");
    assert!(call(&t1, SEM, "trysetpermits", "pool:java-set", &["4"])
        .await
        .bool());
    assert!(!other.try_set_permits(1).await.unwrap());
    assert_eq!(other.available_permits().await.unwrap(), 4);
    assert_eq!(
        raw_count(&mut raw, "pool:java-set").await.as_deref(),
        Some("4")
    );

    // Added and drained across.
    other.add_permits(3).await.unwrap();
    assert_eq!(
        call(&t1, SEM, "available", "pool:java-set", &[])
            .await
            .int(),
        7
    );
    call(&t1, SEM, "addpermits", "pool:java-set", &["-2"])
        .await
        .ok();
    assert_eq!(other.available_permits().await.unwrap(), 5);
    assert_eq!(call(&t1, SEM, "drain", "pool:java-set", &[]).await.int(), 5);
    assert_eq!(other.drain_permits().await.unwrap(), 0);
    other.release(2).await.unwrap();
    assert_eq!(call(&t1, SEM, "drain", "pool:java-set", &[]).await.int(), 2);
    assert_eq!(
        raw_count(&mut raw, "pool:java-set").await.as_deref(),
        Some("0")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_release_wakes_a_rust_waiter_within_500_ms() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let java = Redisson::start_default(server.url()).await;
    let rust = testkit::client(&server).await;
    let t1 = java.thread("t1");
    let name = "wake:java-to-rust";
    let channel = Derived::SemaphoreChannel.of(name);
    assert!(call(&t1, SEM, "trysetpermits", name, &["2"]).await.bool());

    let mut latencies = Vec::new();
    for _ in 0..ROUNDS {
        call(&t1, SEM, "acquire", name, &["2"]).await.ok();
        subscribers_become(&raw, &channel, 0, GENEROUS).await;
        let pool = rust.semaphore(name);
        let waiter = tokio::spawn(async move {
            let guard: SemaphoreGuard = pool.acquire(2).await.expect("Rust acquire");
            (now_us(), guard)
        });
        subscribers_become(&raw, &channel, 1, GENEROUS).await;
        let release = call(&t1, SEM, "release", name, &["2"]).await.ok();
        let (acquired_us, guard) = tokio::time::timeout(GENEROUS, waiter)
            .await
            .expect("the Rust waiter")
            .unwrap();
        latencies.push(ms(acquired_us - release.start_us));
        assert_eq!(raw_count(&mut raw, name).await.as_deref(), Some("0"));
        guard.release().await.unwrap();
    }
    report_wake_ups("semaphore.wake_up.java_release_to_rust_ms", &latencies);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_release_wakes_a_java_waiter_within_500_ms() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let java = Redisson::start_default(server.url()).await;
    let rust = testkit::client(&server).await;
    let t1 = java.thread("t1");
    let name = "wake:rust-to-java";
    let channel = Derived::SemaphoreChannel.of(name);
    let pool = rust.semaphore(name);
    assert!(pool.try_set_permits(1).await.unwrap());

    let mut latencies = Vec::new();
    for _ in 0..ROUNDS {
        let guard = pool.acquire(1).await.unwrap();
        subscribers_become(&raw, &channel, 0, GENEROUS).await;
        let mut waiting = start(&t1, SEM, "acquire", name, &["1"]).await;
        subscribers_become(&raw, &channel, 1, GENEROUS).await;
        assert!(waiting.try_now().is_none(), "Java got a permit Rust holds");
        let release_start = now_us();
        guard.release().await.unwrap();
        let acquired = waiting.wait().await.ok();
        latencies.push(ms(acquired.end_us - release_start));
        assert_eq!(raw_count(&mut raw, name).await.as_deref(), Some("0"));
        call(&t1, SEM, "release", name, &["1"]).await.ok();
    }
    report_wake_ups("semaphore.wake_up.rust_release_to_java_ms", &latencies);
}
