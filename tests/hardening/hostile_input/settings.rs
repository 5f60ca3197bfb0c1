//! The client builder's settings: every one just outside its range refused at once, without
//! connecting or allocating for it; every one at the edges of its range accepted.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use redis_rlock::{Client, ClientBuilder};
use testkit::{bounded, RedisServer};

use super::{expect_invalid, LARGEST_ALLOCATION, MAX_NAME, NS};

/// Builders with one setting just outside its documented range.
fn out_of_range_builders(url: &str) -> Vec<(String, ClientBuilder)> {
    let b = || Client::builder(url);
    let ms = Duration::from_millis;
    let secs = Duration::from_secs;
    let mut builders: Vec<(String, ClientBuilder)> = vec![
        ("pool_size 0".into(), b().pool_size(0)),
        ("pool_size 1".into(), b().pool_size(1)),
        ("pool_size 1025".into(), b().pool_size(1025)),
        ("pool_size 100_000_000".into(), b().pool_size(100_000_000)),
        ("pool_size usize::MAX".into(), b().pool_size(usize::MAX)),
        ("watchdog_batch_size 0".into(), b().watchdog_batch_size(0)),
        (
            "watchdog_batch_size 10_001".into(),
            b().watchdog_batch_size(10_001),
        ),
        (
            "watchdog_batch_size usize::MAX".into(),
            b().watchdog_batch_size(usize::MAX),
        ),
        ("retry_attempts 0".into(), b().retry_attempts(0)),
        ("retry_attempts 101".into(), b().retry_attempts(101)),
        (
            "retry_attempts u32::MAX".into(),
            b().retry_attempts(u32::MAX),
        ),
        (
            "key_prefix 65,537 bytes".into(),
            b().key_prefix("p".repeat(MAX_NAME + 1)),
        ),
        (
            "replica_sync 0 replicas".into(),
            b().replica_sync(0, ms(100)),
        ),
        (
            "replica_sync 1001 replicas".into(),
            b().replica_sync(1001, ms(100)),
        ),
        (
            "replica_sync usize::MAX replicas".into(),
            b().replica_sync(usize::MAX, ms(100)),
        ),
        (
            "replica_sync timeout 0".into(),
            b().replica_sync(1, Duration::ZERO),
        ),
        (
            "replica_sync timeout 1 ms - 1 ns".into(),
            b().replica_sync(1, ms(1) - NS),
        ),
        (
            "replica_sync timeout = response_timeout".into(),
            b().response_timeout(secs(1)).replica_sync(1, secs(1)),
        ),
        (
            "replica_sync timeout > response_timeout".into(),
            b().response_timeout(secs(1)).replica_sync(1, secs(2)),
        ),
    ];
    type Setter = fn(ClientBuilder, Duration) -> ClientBuilder;
    let durations: [(&str, Setter, Duration, Duration); 7] = [
        (
            "watchdog_timeout",
            ClientBuilder::watchdog_timeout,
            ms(10),
            secs(86_400),
        ),
        (
            "connect_timeout",
            ClientBuilder::connect_timeout,
            ms(1),
            secs(300),
        ),
        (
            "response_timeout",
            ClientBuilder::response_timeout,
            ms(1),
            secs(300),
        ),
        (
            "subscribe_timeout",
            ClientBuilder::subscribe_timeout,
            ms(1),
            secs(3600),
        ),
        (
            "fair_waiter_timeout",
            ClientBuilder::fair_waiter_timeout,
            ms(100),
            secs(86_400),
        ),
        (
            "ping_interval",
            ClientBuilder::ping_interval,
            ms(100),
            secs(3600),
        ),
        // No minimum: a zero delay is in range.
        (
            "retry_delay",
            ClientBuilder::retry_delay,
            Duration::ZERO,
            secs(60),
        ),
    ];
    for (name, setter, min, max) in durations {
        if !min.is_zero() {
            builders.push((format!("{name} {min:?} - 1 ns"), setter(b(), min - NS)));
            builders.push((format!("{name} 0"), setter(b(), Duration::ZERO)));
        }
        builders.push((format!("{name} {max:?} + 1 ns"), setter(b(), max + NS)));
        builders.push((format!("{name} Duration::MAX"), setter(b(), Duration::MAX)));
    }
    builders
}

#[tokio::test]
async fn builder_refuses_every_setting_just_outside_its_range_at_once() {
    let server = RedisServer::start();
    for (what, builder) in out_of_range_builders(&server.url()) {
        let started = Instant::now();
        let result = bounded(&what, builder.build()).await;
        expect_invalid(&what, result);
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{what}: refused only after {:?}",
            started.elapsed()
        );
    }
}

#[tokio::test]
async fn a_rejected_build_connects_to_nothing() {
    let server = RedisServer::start();
    let before = testkit::info_field(&server, "stats", "total_connections_received", "");
    for (what, builder) in out_of_range_builders(&server.url()) {
        expect_invalid(&what, bounded(&what, builder.build()).await);
    }
    let after = testkit::info_field(&server, "stats", "total_connections_received", "");
    // The second `redis-cli` is the one connection made since the first.
    assert_eq!(after, before + 1, "a rejected build connected to Redis");
}

#[tokio::test]
async fn huge_pool_sizes_fail_fast_without_allocating() {
    let server = RedisServer::start();
    for size in [usize::MAX, 100_000_000, 1025] {
        let started = Instant::now();
        let result = Client::builder(server.url()).pool_size(size).build().await;
        let took = started.elapsed();
        expect_invalid(&format!("pool_size {size}"), result);
        assert!(took < Duration::from_secs(1), "pool_size {size}: {took:?}");
    }
    // Allocations of the whole test process, other tests included: none comes near what a
    // pool of 100 million slots would take (at least 800 MB).
    let largest = LARGEST_ALLOCATION.load(Ordering::Relaxed);
    assert!(
        largest < 64 * 1024 * 1024,
        "an allocation of {largest} bytes was made"
    );
}

#[tokio::test]
async fn builder_accepts_every_setting_at_the_edges_of_its_range() {
    let server = RedisServer::start();
    let b = || Client::builder(server.url());
    let ms = Duration::from_millis;
    let secs = Duration::from_secs;
    let edges: Vec<(&str, ClientBuilder)> = vec![
        ("pool_size 2", b().pool_size(2)),
        ("pool_size 1024", b().pool_size(1024)),
        ("watchdog_timeout 10 ms", b().watchdog_timeout(ms(10))),
        ("watchdog_timeout 24 h", b().watchdog_timeout(secs(86_400))),
        ("watchdog_batch_size 1", b().watchdog_batch_size(1)),
        (
            "watchdog_batch_size 10_000",
            b().watchdog_batch_size(10_000),
        ),
        ("connect_timeout 5 min", b().connect_timeout(secs(300))),
        ("response_timeout 5 min", b().response_timeout(secs(300))),
        ("subscribe_timeout 1 ms", b().subscribe_timeout(ms(1))),
        ("subscribe_timeout 1 h", b().subscribe_timeout(secs(3600))),
        ("retry_attempts 1", b().retry_attempts(1)),
        ("retry_attempts 100", b().retry_attempts(100)),
        ("retry_delay 0", b().retry_delay(Duration::ZERO)),
        ("retry_delay 60 s", b().retry_delay(secs(60))),
        (
            "fair_waiter_timeout 100 ms",
            b().fair_waiter_timeout(ms(100)),
        ),
        (
            "fair_waiter_timeout 24 h",
            b().fair_waiter_timeout(secs(86_400)),
        ),
        ("ping_interval 100 ms", b().ping_interval(ms(100))),
        ("ping_interval 1 h", b().ping_interval(secs(3600))),
        ("key_prefix empty", b().key_prefix("")),
        ("key_prefix 64 KiB", b().key_prefix("p".repeat(MAX_NAME))),
        ("replica_sync 1, 1 ms", b().replica_sync(1, ms(1))),
        (
            "replica_sync 1000, response_timeout - 1 ns",
            b().response_timeout(secs(1))
                .replica_sync(1000, secs(1) - NS),
        ),
    ];
    for (what, builder) in edges {
        let client = bounded(what, builder.build()).await;
        if let Err(e) = client {
            panic!("{what}: refused: {e}");
        }
    }
    // A 1 ms connect or response timeout is in range; on a loaded machine a single
    // connect may still take longer than that, which is a timeout, never a refusal.
    for (what, make) in [
        (
            "connect_timeout 1 ms",
            (|b: ClientBuilder| b.connect_timeout(Duration::from_millis(1)))
                as fn(ClientBuilder) -> ClientBuilder,
        ),
        ("response_timeout 1 ms", |b: ClientBuilder| {
            b.response_timeout(Duration::from_millis(1))
        }),
    ] {
        let mut built = false;
        for _ in 0..20 {
            match bounded(what, make(b()).build()).await {
                Ok(_) => {
                    built = true;
                    break;
                }
                Err(e) => assert!(!e.is_invalid_argument(), "{what}: refused: {e}"),
            }
        }
        assert!(built, "{what}: never built in 20 tries");
    }
}
