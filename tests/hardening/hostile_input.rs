//! Hostile and out-of-range input: settings, leases, caps and names outside their ranges are
//! refused at once with `InvalidArgument` and nothing sent; keys that hold other data (a
//! string, a hash of user data, a list, a Redisson read-write lock) are refused with
//! `NotALock` and left exactly as they were; fencing tokens stay exact over their whole
//! range.

use testkit::bounded;

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use redis::aio::MultiplexedConnection;
use redis_rlock::{
    Client, ClientBuilder, DistributedLock, Error, Lock, LockGuard, LockKind, MultiLock, RedLock,
};
use testkit::{client, lock_hash, RedisServer};
use tokio::sync::Barrier;

/// The largest single allocation this test process asked for, so that a setting that
/// would make the library allocate a huge buffer is caught even when it fails. It counts
/// for the whole `hardening` binary: none of its other files allocates anywhere near the
/// bound checked.
struct TrackingAllocator;

static LARGEST_ALLOCATION: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the only addition is
// an atomic maximum of the requested sizes.
unsafe impl GlobalAlloc for TrackingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST_ALLOCATION.fetch_max(layout.size(), Ordering::Relaxed);
        System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LARGEST_ALLOCATION.fetch_max(layout.size(), Ordering::Relaxed);
        System.alloc_zeroed(layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST_ALLOCATION.fetch_max(new_size, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: TrackingAllocator = TrackingAllocator;

/// The longest name (and fenced-write key) accepted, in bytes.
const MAX_NAME: usize = 64 * 1024;
/// Ten years in milliseconds: the longest lease and cap accepted.
const TEN_YEARS: Duration = Duration::from_millis(10 * 365 * 24 * 60 * 60 * 1000);
/// The shortest lease and cap accepted.
const MIN_LEASE: Duration = Duration::from_millis(10);
/// A bound for calls that must not wait: they return at once or they hang.
const GENEROUS: Duration = Duration::from_secs(5);
/// 2^53: the first integer a double cannot tell from its successor.
const TWO_POW_53: u64 = 1 << 53;

const NS: Duration = Duration::from_nanos(1);

fn expect_invalid<T: Debug>(what: &str, result: redis_rlock::Result<T>) {
    match result {
        Err(e) => assert!(e.is_invalid_argument(), "{what}: {e}"),
        Ok(value) => panic!("{what}: accepted ({value:?})"),
    }
}

fn expect_not_a_lock<T: Debug>(what: &str, result: redis_rlock::Result<T>) -> Error {
    match result {
        Err(e) => {
            assert!(e.is_not_a_lock(), "{what}: {e} ({e:?})");
            e
        }
        Ok(value) => panic!("{what}: a key that is not a lock was accepted ({value:?})"),
    }
}

/// `DUMP` of `key` and its PTTL: equal before and after means the key was not touched.
async fn snapshot(conn: &mut MultiplexedConnection, key: &str) -> (Option<Vec<u8>>, i64) {
    let dump: Option<Vec<u8>> = redis::cmd("DUMP").arg(key).query_async(conn).await.unwrap();
    (dump, testkit::pttl(conn, key).await)
}

async fn get(conn: &mut MultiplexedConnection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query_async(conn).await.unwrap()
}

async fn set(conn: &mut MultiplexedConnection, key: &str, value: &str) {
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg(value)
        .query_async(conn)
        .await
        .unwrap();
}

/// Data that a lock name may collide with.
#[derive(Debug, Clone, Copy)]
enum Foreign {
    String,
    UserHash,
    List,
    ReadWriteLock,
}

const FOREIGN: [Foreign; 4] = [
    Foreign::String,
    Foreign::UserHash,
    Foreign::List,
    Foreign::ReadWriteLock,
];

/// The owner field of a Redisson read-write lock's reader.
const READER: &str = "6ba7b810-9dad-11d1-80b4-00c04fd430c8:1";

/// Writes `kind` of data at `key`, as a user (or Redisson) would.
async fn plant(conn: &mut MultiplexedConnection, kind: Foreign, key: &str) {
    let mut cmd = match kind {
        Foreign::String => redis::cmd("SET"),
        Foreign::UserHash | Foreign::ReadWriteLock => redis::cmd("HSET"),
        Foreign::List => redis::cmd("RPUSH"),
    };
    cmd.arg(key);
    match kind {
        Foreign::String => cmd.arg("precious user data"),
        Foreign::UserHash => cmd
            .arg("name")
            .arg("Ada")
            .arg("email")
            .arg("ada@example.com"),
        Foreign::List => cmd.arg("job-1").arg("job-2").arg("job-3"),
        Foreign::ReadWriteLock => cmd.arg("mode").arg("read").arg(READER).arg(1),
    };
    let _: () = cmd.query_async(conn).await.unwrap();
}

// ---------------------------------------------------------------------------------------
// Settings
// ---------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------
// Leases and caps
// ---------------------------------------------------------------------------------------

fn bad_leases() -> [Duration; 6] {
    [
        Duration::ZERO,
        Duration::from_millis(1),
        Duration::from_millis(9),
        MIN_LEASE - NS,
        TEN_YEARS + Duration::from_millis(1),
        Duration::MAX,
    ]
}

/// Every call of `lock` that takes a lease refuses each of [`bad_leases`].
async fn refuses_bad_leases(kind: &str, lock: &impl DistributedLock<Guard = LockGuard>) {
    for lease in bad_leases() {
        let what = format!("{kind} lock_with_lease({lease:?})");
        expect_invalid(&what, bounded(&what, lock.lock_with_lease(lease)).await);
        let what = format!("{kind} try_lock_with(1 s, {lease:?})");
        let result = lock.try_lock_with(Duration::from_secs(1), lease);
        expect_invalid(&what, bounded(&what, result).await);
    }
}

#[tokio::test]
async fn leases_under_ten_ms_or_over_ten_years_are_refused_with_nothing_written() {
    let server = RedisServer::start();
    let client = client(&server).await;
    refuses_bad_leases("RLock", &client.lock("lease")).await;
    refuses_bad_leases("FairLock", &client.fair_lock("lease")).await;
    refuses_bad_leases("FencedLock", &client.fenced_lock("lease")).await;
    assert_eq!(
        testkit::dbsize(&mut server.raw().await).await,
        0,
        "nothing written"
    );
    assert_eq!(client.status().held_locks, 0);
}

#[tokio::test]
async fn a_ten_ms_lease_and_a_ten_year_lease_are_accepted() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    for kind in KINDS {
        let lock = BoxedLock::of(&client, kind, &format!("short:{kind}"));
        // A 10 ms lease may run out before the call returns on a slow machine: then the
        // guard is lost at once, but the lease itself was taken, not refused.
        let guard = lock.lock_with_lease(MIN_LEASE).await;
        assert!(guard.is_ok(), "{kind} 10 ms lease: {guard:?}");
        drop(guard);
        let guard = lock.try_lock_with(Duration::from_secs(1), MIN_LEASE).await;
        assert!(guard.is_ok(), "{kind} try_lock_with 10 ms lease: {guard:?}");
        drop(guard);

        let name = format!("long:{kind}");
        let lock = BoxedLock::of(&client, kind, &name);
        let guard = lock.lock_with_lease(TEN_YEARS).await.unwrap();
        let ttl = testkit::pttl(&mut raw, &name).await;
        assert!(
            ttl > (TEN_YEARS - Duration::from_secs(60)).as_millis() as i64,
            "{kind}: pttl {ttl}"
        );
        guard.unlock().await.unwrap();
        let guard = lock
            .try_lock_with(Duration::ZERO, TEN_YEARS)
            .await
            .unwrap()
            .expect("a free lock is taken");
        guard.unlock().await.unwrap();
        assert!(
            !testkit::key_exists(&mut raw, &name).await,
            "{kind}: released"
        );
    }
}

/// The lock kinds, by name.
const KINDS: [&str; 3] = ["RLock", "FairLock", "FencedLock"];

/// Any lock kind behind one type, for tables of kinds.
enum BoxedLock {
    R(redis_rlock::RLock),
    Fair(redis_rlock::FairLock),
    Fenced(redis_rlock::FencedLock),
}

impl BoxedLock {
    /// A lock of `kind` (one of [`KINDS`]) named `name`.
    fn of(client: &Client, kind: &str, name: &str) -> Self {
        match kind {
            "RLock" => BoxedLock::R(client.lock(name)),
            "FairLock" => BoxedLock::Fair(client.fair_lock(name)),
            "FencedLock" => BoxedLock::Fenced(client.fenced_lock(name)),
            other => panic!("no lock kind {other}"),
        }
    }

    async fn lock_with_lease(
        &self,
        lease: Duration,
    ) -> redis_rlock::Result<redis_rlock::LockGuard> {
        match self {
            BoxedLock::R(l) => l.lock_with_lease(lease).await,
            BoxedLock::Fair(l) => l.lock_with_lease(lease).await,
            BoxedLock::Fenced(l) => l.lock_with_lease(lease).await,
        }
    }

    async fn try_lock_with(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> redis_rlock::Result<Option<redis_rlock::LockGuard>> {
        match self {
            BoxedLock::R(l) => l.try_lock_with(wait, lease).await,
            BoxedLock::Fair(l) => l.try_lock_with(wait, lease).await,
            BoxedLock::Fenced(l) => l.try_lock_with(wait, lease).await,
        }
    }

    async fn acquire_all(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Vec<(&'static str, redis_rlock::Result<()>)> {
        match self {
            BoxedLock::R(l) => testkit::every_acquire(l, wait, lease).await,
            BoxedLock::Fair(l) => testkit::every_acquire(l, wait, lease).await,
            BoxedLock::Fenced(l) => testkit::every_acquire(l, wait, lease).await,
        }
    }
}

#[tokio::test]
async fn group_leases_under_ten_ms_or_over_ten_years_are_refused_with_nothing_written() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let red = RedLock::new(vec![client.lock("group:red")]);
    let fenced_red = RedLock::new(vec![client.fenced_lock("group:fenced")]);
    let multi = MultiLock::new(vec![client.lock("group:a"), client.lock("group:b")]);
    for lease in bad_leases() {
        for (kind, lock_with_lease, try_lock_with) in [
            (
                "RedLock",
                red.lock_with_lease(lease).await.map(drop),
                red.try_lock_with(Duration::from_secs(1), lease)
                    .await
                    .map(drop),
            ),
            (
                "RedLock<Fenced>",
                fenced_red.lock_with_lease(lease).await.map(drop),
                fenced_red
                    .try_lock_with(Duration::from_secs(1), lease)
                    .await
                    .map(drop),
            ),
            (
                "MultiLock",
                multi.lock_with_lease(lease).await.map(drop),
                multi
                    .try_lock_with(Duration::from_secs(1), lease)
                    .await
                    .map(drop),
            ),
        ] {
            expect_invalid(
                &format!("{kind} lock_with_lease({lease:?})"),
                lock_with_lease,
            );
            expect_invalid(&format!("{kind} try_lock_with({lease:?})"), try_lock_with);
        }
    }
    assert_eq!(
        testkit::dbsize(&mut server.raw().await).await,
        0,
        "nothing written"
    );
}

#[tokio::test]
async fn a_group_accepts_a_ten_ms_lease() {
    let server = RedisServer::start();
    let client = client(&server).await;
    // The node timeout must leave time within the lease; 10 ms is then a valid lease.
    let node_timeout = Duration::from_millis(5);
    let red = RedLock::new(vec![client.lock("group:red")]).with_node_timeout(node_timeout);
    let multi = MultiLock::new(vec![client.lock("group:a"), client.lock("group:b")])
        .with_node_timeout(node_timeout);
    // On a loaded machine a 5 ms node timeout or a 10 ms lease may run out in a round;
    // what matters is that the lease is not refused.
    for (kind, result) in [
        (
            "RedLock",
            red.try_lock_with(Duration::from_secs(2), MIN_LEASE)
                .await
                .map(drop),
        ),
        (
            "MultiLock",
            multi
                .try_lock_with(Duration::from_secs(2), MIN_LEASE)
                .await
                .map(drop),
        ),
    ] {
        if let Err(e) = result {
            assert!(!e.is_invalid_argument(), "{kind}: 10 ms lease refused: {e}");
        }
    }
    let long = RedLock::new(vec![client.lock("group:long")]);
    let guard = long.lock_with_lease(TEN_YEARS).await.unwrap();
    guard.unlock().await.unwrap();
}

fn bad_caps() -> [Duration; 5] {
    [
        Duration::ZERO,
        Duration::from_millis(1),
        Duration::from_millis(9),
        TEN_YEARS + Duration::from_millis(1),
        Duration::MAX,
    ]
}

#[tokio::test]
async fn max_hold_under_ten_ms_or_over_ten_years_is_refused_with_nothing_written() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let wait = Duration::from_secs(1);
    let lease = Duration::from_secs(10);
    for cap in bad_caps() {
        let lock = client.lock("capped").with_max_hold(cap);
        let fair = client.fair_lock("capped").with_max_hold(cap);
        let fenced = client.fenced_lock("capped").with_max_hold(cap);
        for (kind, lock) in [
            ("RLock", BoxedLock::R(lock)),
            ("FairLock", BoxedLock::Fair(fair)),
            ("FencedLock", BoxedLock::Fenced(fenced)),
        ] {
            for (call, result) in lock.acquire_all(wait, lease).await {
                expect_invalid(&format!("{kind} with_max_hold({cap:?}).{call}"), result);
            }
        }
        let red = RedLock::new(vec![client.lock("capped")]).with_max_hold(cap);
        expect_invalid(
            &format!("RedLock cap {cap:?}"),
            red.try_lock().await.map(drop),
        );
        expect_invalid(&format!("RedLock cap {cap:?}"), red.lock().await.map(drop));
        // A lock's own cap is checked inside a group too.
        let inner = RedLock::new(vec![client.lock("capped").with_max_hold(cap)]);
        expect_invalid(
            &format!("RedLock of a lock capped {cap:?}"),
            inner.try_lock_for(wait).await.map(drop),
        );
        let multi = MultiLock::new(vec![client.lock("capped")]).with_max_hold(cap);
        expect_invalid(
            &format!("MultiLock cap {cap:?}"),
            multi.try_lock_with(wait, lease).await.map(drop),
        );
    }
    assert_eq!(
        testkit::dbsize(&mut server.raw().await).await,
        0,
        "nothing written"
    );
}

#[tokio::test]
async fn max_hold_of_ten_ms_and_of_ten_years_is_accepted() {
    let server = RedisServer::start();
    let client = client(&server).await;
    for cap in [MIN_LEASE, TEN_YEARS] {
        let lock = client
            .lock(format!("capped:{}", cap.as_millis()))
            .with_max_hold(cap);
        let guard = lock.try_lock().await;
        assert!(matches!(guard, Ok(Some(_))), "RLock cap {cap:?}: {guard:?}");
        drop(guard);
        let red =
            RedLock::new(vec![client.lock(format!("red:{}", cap.as_millis()))]).with_max_hold(cap);
        // A 10 ms cap may leave a group no validity after a slow round; it is not refused.
        if let Err(e) = red.try_lock().await {
            assert!(!e.is_invalid_argument(), "RedLock cap {cap:?}: {e}");
        }
    }
}

// ---------------------------------------------------------------------------------------
// Names
// ---------------------------------------------------------------------------------------

/// Every call of `lock` refuses its name at once.
async fn every_call_refuses_the_name<K: LockKind>(kind: &str, label: &str, lock: &Lock<K>) {
    let wait = Duration::from_secs(1);
    let lease = Duration::from_secs(10);
    let mut calls = testkit::every_acquire(lock, wait, lease).await;
    calls.extend(testkit::every_read(lock).await);
    calls.push((
        "force_unlock()",
        bounded("force_unlock()", lock.force_unlock())
            .await
            .map(drop),
    ));
    for (call, result) in calls {
        expect_invalid(&format!("{kind} named {label}: {call}"), result);
    }
}

#[tokio::test]
async fn empty_and_oversized_names_are_refused_at_once_by_every_call() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let names = [
        ("empty".to_string(), String::new()),
        ("65,537 bytes".to_string(), "n".repeat(MAX_NAME + 1)),
        ("1 MB".to_string(), "n".repeat(1024 * 1024)),
    ];
    for (label, name) in &names {
        let started = Instant::now();
        every_call_refuses_the_name("RLock", label, &client.lock(name)).await;
        every_call_refuses_the_name("FairLock", label, &client.fair_lock(name)).await;
        every_call_refuses_the_name("FencedLock", label, &client.fenced_lock(name)).await;

        let red = RedLock::new(vec![client.lock(name)]);
        expect_invalid(&format!("RedLock {label}"), red.lock().await.map(drop));
        expect_invalid(&format!("RedLock {label}"), red.try_lock().await.map(drop));
        let fenced = RedLock::new(vec![client.fenced_lock(name)]);
        expect_invalid(
            &format!("RedLock<Fenced> {label}"),
            fenced.try_lock_for(Duration::from_secs(1)).await.map(drop),
        );
        // A good lock next to a bad one: nothing is taken, not even the good one.
        let multi = MultiLock::new(vec![client.lock("good"), client.lock(name)]);
        expect_invalid(
            &format!("MultiLock {label}"),
            multi
                .lock_with_lease(Duration::from_secs(10))
                .await
                .map(drop),
        );
        let took = started.elapsed();
        // 30 calls: a name that was sent would take seconds (a 600 MB name once took 25 s).
        assert!(
            took < Duration::from_secs(3),
            "{label}: the refusals took {took:?}"
        );
    }
    let mut raw = server.raw().await;
    assert_eq!(testkit::dbsize(&mut raw).await, 0, "nothing written");
    assert_eq!(client.status().held_locks, 0);
    assert_eq!(client.status().subscribed_channels, 0);
}

#[tokio::test]
async fn a_single_call_with_a_huge_name_returns_within_a_second() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let name = "x".repeat(1024 * 1024);
    let lock = client.lock(&name);
    for (call, started, result) in [
        ("lock()", Instant::now(), lock.lock().await.map(drop)),
        (
            "try_lock()",
            Instant::now(),
            lock.try_lock().await.map(drop),
        ),
        (
            "force_unlock()",
            Instant::now(),
            lock.force_unlock().await.map(drop),
        ),
        (
            "is_locked()",
            Instant::now(),
            lock.is_locked().await.map(drop),
        ),
    ] {
        let took = started.elapsed();
        expect_invalid(call, result);
        assert!(took < Duration::from_secs(1), "{call} took {took:?}");
    }
    assert_eq!(
        testkit::dbsize(&mut server.raw().await).await,
        0,
        "nothing written"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_of_exactly_64_kib_works_end_to_end() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let mut raw = server.raw().await;
    for (kind, prefix) in [("RLock", 'r'), ("FairLock", 'f'), ("FencedLock", 'x')] {
        let name = prefix.to_string().repeat(MAX_NAME);
        assert_eq!(name.len(), 65_536);
        let (holder, waiter) = (
            BoxedLock::of(&a, kind, &name),
            BoxedLock::of(&b, kind, &name),
        );
        let guard = holder
            .lock_with_lease(Duration::from_secs(30))
            .await
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        if kind == "FencedLock" {
            assert!(guard.fencing_token().is_some());
            let counter = format!("redisson_lock_token:{{{name}}}");
            assert_eq!(
                get(&mut raw, &counter).await,
                guard.fencing_token().map(|t| t.to_string())
            );
        }
        let hash = lock_hash(&mut raw, &name).await;
        assert_eq!(hash.get(guard.owner()), Some(&1), "{kind}");
        // The other client waits on the lock's channel and is woken by the release.
        let waiting = testkit::Waiting::listening(&b, 1, async move {
            let got = waiter
                .try_lock_with(Duration::from_secs(10), Duration::from_secs(30))
                .await;
            got.map(|g| g.expect("woken by the release"))
        })
        .await;
        let woken = waiting
            .woken_by(async { guard.unlock().await.unwrap() })
            .await;
        assert!(woken.after < GENEROUS, "{kind}: {:?}", woken.after);
        let second = woken.value.unwrap();
        let hash = lock_hash(&mut raw, &name).await;
        assert_eq!(hash.get(second.owner()), Some(&1), "{kind}");
        second.unlock().await.unwrap();
        assert!(
            !testkit::key_exists(&mut raw, &name).await,
            "{kind}: released"
        );
    }
    // The queries and force_unlock take it too.
    let name = "q".repeat(MAX_NAME);
    let lock = a.lock(&name);
    let guard = lock.lock().await.unwrap();
    assert!(lock.is_locked().await.unwrap());
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    assert!(lock.remaining_ttl().await.unwrap().is_some());
    assert!(lock.force_unlock().await.unwrap());
    assert!(!testkit::key_exists(&mut raw, &name).await);
    drop(guard);
}

#[tokio::test]
async fn fenced_set_refuses_an_empty_key_and_keys_over_64_kib() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    for (label, key) in [
        ("empty", String::new()),
        ("65,537 bytes", "k".repeat(MAX_NAME + 1)),
        ("1 MB", "k".repeat(1024 * 1024)),
    ] {
        let started = Instant::now();
        let result = bounded(label, client.fenced_set(&key, 7, b"value")).await;
        expect_invalid(&format!("fenced_set key {label}"), result);
        assert!(started.elapsed() < Duration::from_secs(1), "{label}");
    }
    assert_eq!(testkit::dbsize(&mut raw).await, 0, "nothing written");

    let key = "k".repeat(MAX_NAME);
    assert!(client.fenced_set(&key, 7, b"value").await.unwrap());
    assert_eq!(get(&mut raw, &key).await.as_deref(), Some("value"));
    assert!(!client.fenced_set(&key, 6, b"stale").await.unwrap());
}

// ---------------------------------------------------------------------------------------
// Keys that are not locks
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn force_unlock_refuses_a_string_key_and_keeps_it() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    set(&mut raw, "user:42", "precious").await;
    let _: () = redis::cmd("PEXPIRE")
        .arg("user:42")
        .arg(600_000)
        .query_async(&mut raw)
        .await
        .unwrap();
    let before = snapshot(&mut raw, "user:42").await;
    let err = expect_not_a_lock(
        "force_unlock of a string",
        bounded("force_unlock", client.lock("user:42").force_unlock()).await,
    );
    assert!(err.to_string().contains("user:42"), "{err}");
    assert!(err.to_string().contains("string"), "{err}");
    assert_eq!(get(&mut raw, "user:42").await.as_deref(), Some("precious"));
    let after = snapshot(&mut raw, "user:42").await;
    assert_eq!(before.0, after.0, "the string changed");
    assert!(after.1 > 500_000, "its expiry changed: {}", after.1);
}

#[tokio::test]
async fn force_unlock_refuses_a_hash_of_user_data_and_keeps_it() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    plant(&mut raw, Foreign::UserHash, "user:ada").await;
    let before = snapshot(&mut raw, "user:ada").await;
    let err = expect_not_a_lock(
        "force_unlock of a user hash",
        bounded("force_unlock", client.lock("user:ada").force_unlock()).await,
    );
    assert!(err.to_string().contains("hash"), "{err}");
    let fields: HashMap<String, String> = redis::cmd("HGETALL")
        .arg("user:ada")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(fields.get("name").map(String::as_str), Some("Ada"));
    assert_eq!(
        fields.get("email").map(String::as_str),
        Some("ada@example.com")
    );
    assert_eq!(before, snapshot(&mut raw, "user:ada").await);
}

#[tokio::test]
async fn force_unlock_refuses_a_list_and_keeps_it() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    plant(&mut raw, Foreign::List, "jobs").await;
    let before = snapshot(&mut raw, "jobs").await;
    let err = expect_not_a_lock(
        "force_unlock of a list",
        bounded("force_unlock", client.lock("jobs").force_unlock()).await,
    );
    assert!(err.to_string().contains("list"), "{err}");
    assert_eq!(before, snapshot(&mut raw, "jobs").await);
}

#[tokio::test]
async fn force_unlock_refuses_a_read_write_lock_and_says_so() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    plant(&mut raw, Foreign::ReadWriteLock, "rw").await;
    let before = snapshot(&mut raw, "rw").await;
    let err = expect_not_a_lock(
        "force_unlock of a read-write lock",
        bounded("force_unlock", client.lock("rw").force_unlock()).await,
    );
    assert!(err.to_string().contains("read-write lock"), "{err}");
    assert_eq!(before, snapshot(&mut raw, "rw").await);
}

#[tokio::test]
async fn fair_and_fenced_force_unlock_refuse_keys_that_are_not_locks() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    for kind in FOREIGN {
        let key = format!("{kind:?}");
        plant(&mut raw, kind, &key).await;
        let before = snapshot(&mut raw, &key).await;
        let keys_before = testkit::dbsize(&mut raw).await;
        let what = format!("FairLock force_unlock of {kind:?}");
        let result = bounded(&what, client.fair_lock(&key).force_unlock()).await;
        let err = expect_not_a_lock(&what, result);
        if matches!(kind, Foreign::ReadWriteLock) {
            assert!(err.to_string().contains("read-write lock"), "{err}");
        }
        let what = format!("FencedLock force_unlock of {kind:?}");
        let result = bounded(&what, client.fenced_lock(&key).force_unlock()).await;
        let err = expect_not_a_lock(&what, result);
        if matches!(kind, Foreign::ReadWriteLock) {
            assert!(err.to_string().contains("read-write lock"), "{err}");
        }
        assert_eq!(before, snapshot(&mut raw, &key).await, "{kind:?} changed");
        assert_eq!(
            keys_before,
            testkit::dbsize(&mut raw).await,
            "{kind:?}: keys written"
        );
    }
}

/// Every acquire call and query of `lock` (named `key`, which holds `kind`) is refused
/// with `NotALock`, and the key and the key count stay as they were.
async fn refuses_to_take_over<K: LockKind>(
    server: &RedisServer,
    lock_kind: &str,
    kind: Foreign,
    key: &str,
    lock: &Lock<K>,
) {
    let mut raw = server.raw().await;
    let before = snapshot(&mut raw, key).await;
    let keys_before = testkit::dbsize(&mut raw).await;
    let wait = Duration::from_millis(300);
    let lease = Duration::from_secs(10);
    let mut calls = testkit::every_acquire(lock, wait, lease).await;
    calls.extend(testkit::every_read(lock).await);
    for (call, result) in calls {
        let err = expect_not_a_lock(&format!("{lock_kind}.{call} on {kind:?}"), result);
        assert!(err.to_string().contains(key), "{err}");
    }
    assert_eq!(
        before,
        snapshot(&mut raw, key).await,
        "{lock_kind} on {kind:?}: the key changed"
    );
    assert_eq!(
        keys_before,
        testkit::dbsize(&mut raw).await,
        "{lock_kind} on {kind:?}: keys written"
    );
}

#[tokio::test]
async fn rlock_acquire_calls_and_queries_refuse_keys_that_are_not_locks() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    for kind in FOREIGN {
        let key = format!("r:{kind:?}");
        plant(&mut raw, kind, &key).await;
        refuses_to_take_over(&server, "RLock", kind, &key, &client.lock(&key)).await;
    }
    assert_eq!(client.status().held_locks, 0);
}

#[tokio::test]
async fn fair_lock_acquire_calls_and_queries_refuse_keys_that_are_not_locks() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    for kind in FOREIGN {
        let key = format!("f:{kind:?}");
        plant(&mut raw, kind, &key).await;
        refuses_to_take_over(&server, "FairLock", kind, &key, &client.fair_lock(&key)).await;
    }
    assert_eq!(client.status().held_locks, 0);
    assert_eq!(client.status().queued_waiters, 0);
}

#[tokio::test]
async fn fenced_lock_acquire_calls_and_queries_refuse_keys_that_are_not_locks() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    for kind in FOREIGN {
        let key = format!("x:{kind:?}");
        plant(&mut raw, kind, &key).await;
        refuses_to_take_over(&server, "FencedLock", kind, &key, &client.fenced_lock(&key)).await;
        let counter = format!("redisson_lock_token:{{{key}}}");
        assert!(
            !testkit::key_exists(&mut raw, &counter).await,
            "no token drawn"
        );
    }
    assert_eq!(client.status().held_locks, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_bad_key_in_a_batch_fails_only_its_own_callers() {
    const EACH: usize = 16;
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    set(&mut raw, "not-a-lock", "user data").await;
    let calls_before = testkit::info_field(&server, "commandstats", "cmdstat_evalsha", "calls");
    let start = Arc::new(Barrier::new(2 * EACH));
    let tasks: Vec<_> = (0..2 * EACH)
        .map(|i| {
            let name = if i % 2 == 0 {
                format!("good:{i}")
            } else {
                "not-a-lock".to_string()
            };
            let (lock, start) = (client.lock(name), start.clone());
            tokio::spawn(async move {
                start.wait().await;
                tokio::time::timeout(GENEROUS, lock.lock()).await
            })
        })
        .collect();
    let results: Vec<_> = join_all(tasks)
        .await
        .into_iter()
        .map(|joined| joined.unwrap().expect("no call waits"))
        .collect();
    let calls =
        testkit::info_field(&server, "commandstats", "cmdstat_evalsha", "calls") - calls_before;
    // Otherwise this would not test batching: good and bad keys share script calls.
    assert!(
        calls < 2 * EACH as i64,
        "{} acquires at once went out in {calls} script calls",
        2 * EACH
    );
    let mut guards = Vec::new();
    for (i, result) in results.into_iter().enumerate() {
        if i % 2 == 0 {
            let guard = result.unwrap_or_else(|e| panic!("good:{i} failed: {e}"));
            let hash = lock_hash(&mut raw, &format!("good:{i}")).await;
            assert_eq!(hash.get(guard.owner()), Some(&1), "good:{i}: {hash:?}");
            guards.push(guard);
        } else {
            expect_not_a_lock(&format!("task {i} on the string"), result);
        }
    }
    assert_eq!(guards.len(), EACH);
    assert_eq!(
        get(&mut raw, "not-a-lock").await.as_deref(),
        Some("user data")
    );
    for guard in guards {
        guard.unlock().await.unwrap();
    }
}

#[tokio::test]
async fn fair_lock_refuses_a_queue_key_that_is_a_string_and_writes_nothing() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    let queue = "redisson_lock_queue:{jobs}";
    set(&mut raw, queue, "not a queue").await;
    let lock = client.fair_lock("jobs");
    for (call, result) in [
        ("lock()", bounded("lock()", lock.lock()).await.map(drop)),
        (
            "try_lock()",
            bounded("try_lock()", lock.try_lock()).await.map(drop),
        ),
        (
            "try_lock_for()",
            bounded(
                "try_lock_for()",
                lock.try_lock_for(Duration::from_millis(300)),
            )
            .await
            .map(drop),
        ),
    ] {
        let err = expect_not_a_lock(call, result);
        assert!(err.to_string().contains(queue), "{call}: {err}");
    }
    assert_eq!(get(&mut raw, queue).await.as_deref(), Some("not a queue"));
    assert!(
        !testkit::key_exists(&mut raw, "jobs").await,
        "the lock was written"
    );
    assert_eq!(testkit::dbsize(&mut raw).await, 1, "keys written");
}

#[tokio::test]
async fn fair_lock_refuses_a_timeout_key_that_is_a_hash_and_writes_nothing() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    let timeouts = "redisson_lock_timeout:{jobs}";
    plant(&mut raw, Foreign::UserHash, timeouts).await;
    let before = snapshot(&mut raw, timeouts).await;
    let lock = client.fair_lock("jobs");
    for (call, result) in [
        ("lock()", bounded("lock()", lock.lock()).await.map(drop)),
        (
            "try_lock()",
            bounded("try_lock()", lock.try_lock()).await.map(drop),
        ),
    ] {
        let err = expect_not_a_lock(call, result);
        assert!(err.to_string().contains(timeouts), "{call}: {err}");
    }
    assert_eq!(before, snapshot(&mut raw, timeouts).await);
    assert!(
        !testkit::key_exists(&mut raw, "jobs").await,
        "the lock was written"
    );
    assert_eq!(testkit::dbsize(&mut raw).await, 1, "keys written");
}

#[tokio::test]
async fn fenced_lock_with_a_non_numeric_counter_fails_without_writing_the_lock() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    let counter = "redisson_lock_token:{ledger}";
    set(&mut raw, counter, "abc").await;
    let lock = client.fenced_lock("ledger");
    for (call, result) in [
        (
            "try_lock()",
            bounded("try_lock()", lock.try_lock()).await.map(drop),
        ),
        ("lock()", bounded("lock()", lock.lock()).await.map(drop)),
        (
            "lock_with_lease()",
            bounded(
                "lock_with_lease()",
                lock.lock_with_lease(Duration::from_secs(10)),
            )
            .await
            .map(drop),
        ),
    ] {
        let err = result.expect_err(call);
        assert!(!err.is_invalid_argument(), "{call}: {err}");
        assert!(
            !testkit::key_exists(&mut raw, "ledger").await,
            "{call}: half an acquire"
        );
    }
    assert_eq!(get(&mut raw, counter).await.as_deref(), Some("abc"));
    assert_eq!(client.status().held_locks, 0);
}

#[tokio::test]
async fn fenced_lock_refuses_a_counter_that_is_a_hash_and_writes_nothing() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    let counter = "redisson_lock_token:{ledger}";
    plant(&mut raw, Foreign::UserHash, counter).await;
    let before = snapshot(&mut raw, counter).await;
    let lock = client.fenced_lock("ledger");
    for (call, result) in [
        (
            "try_lock()",
            bounded("try_lock()", lock.try_lock()).await.map(drop),
        ),
        ("lock()", bounded("lock()", lock.lock()).await.map(drop)),
    ] {
        let err = expect_not_a_lock(call, result);
        assert!(err.to_string().contains(counter), "{call}: {err}");
    }
    assert_eq!(before, snapshot(&mut raw, counter).await);
    assert!(
        !testkit::key_exists(&mut raw, "ledger").await,
        "half an acquire"
    );
    assert_eq!(testkit::dbsize(&mut raw).await, 1, "keys written");
}

#[tokio::test]
async fn unlocking_a_lock_overwritten_with_a_string_fails_and_keeps_the_string() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    let lock = client.lock("overwritten");
    // A fixed lease: no watchdog renewal to notice the change first.
    let guard = lock.lock_with_lease(Duration::from_secs(30)).await.unwrap();
    let lost = guard.lost();
    set(&mut raw, "overwritten", "someone else's data").await;
    let err = expect_not_a_lock("unlock", bounded("unlock", guard.unlock()).await);
    assert!(err.to_string().contains("overwritten"), "{err}");
    assert_eq!(
        get(&mut raw, "overwritten").await.as_deref(),
        Some("someone else's data")
    );
    // The lock is gone: the `lost()` future taken while it was held must say so.
    let reason = tokio::time::timeout(Duration::from_secs(2), lost)
        .await
        .expect("lost() still pending 2 s after unlock() found the lock overwritten");
    assert_eq!(reason, redis_rlock::LostReason::Released);
}

#[tokio::test]
async fn unlocking_a_fair_or_fenced_lock_overwritten_with_a_string_fails_and_keeps_it() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    for (kind, guard) in [
        (
            "FairLock",
            client
                .fair_lock("fair")
                .lock_with_lease(Duration::from_secs(30))
                .await
                .unwrap(),
        ),
        (
            "FencedLock",
            client
                .fenced_lock("fenced")
                .lock_with_lease(Duration::from_secs(30))
                .await
                .unwrap(),
        ),
    ] {
        let key = guard.key().to_string();
        let lost = guard.lost();
        set(&mut raw, &key, "someone else's data").await;
        expect_not_a_lock(kind, bounded(kind, guard.unlock()).await);
        assert_eq!(
            get(&mut raw, &key).await.as_deref(),
            Some("someone else's data"),
            "{kind}"
        );
        tokio::time::timeout(Duration::from_secs(2), lost)
            .await
            .unwrap_or_else(|_| {
                panic!("{kind}: lost() still pending 2 s after unlock() found the lock overwritten")
            });
    }
}

// ---------------------------------------------------------------------------------------
// Fencing tokens over the whole range
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn fencing_tokens_stay_exact_past_2_pow_53() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    let counter = "redisson_lock_token:{ledger}";
    set(&mut raw, counter, &(TWO_POW_53 - 1).to_string()).await;
    let lock = client.fenced_lock("ledger");
    let mut tokens = Vec::new();
    for _ in 0..3 {
        let guard = lock.lock().await.unwrap();
        tokens.push(guard.fencing_token().unwrap());
        guard.unlock().await.unwrap();
    }
    assert_eq!(tokens, [TWO_POW_53, TWO_POW_53 + 1, TWO_POW_53 + 2]);
    assert_eq!(
        get(&mut raw, counter).await,
        Some((TWO_POW_53 + 2).to_string())
    );
}

#[tokio::test]
async fn fencing_tokens_reach_i64_max_then_fail_without_writing_the_lock() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    let counter = "redisson_lock_token:{ledger}";
    set(&mut raw, counter, &(i64::MAX - 1).to_string()).await;
    let lock = client.fenced_lock("ledger");
    let guard = lock.lock().await.unwrap();
    assert_eq!(guard.fencing_token(), Some(i64::MAX as u64));
    guard.unlock().await.unwrap();

    for (call, result) in [
        ("lock()", bounded("lock()", lock.lock()).await.map(drop)),
        (
            "try_lock()",
            bounded("try_lock()", lock.try_lock()).await.map(drop),
        ),
    ] {
        let err = result.expect_err(call);
        assert!(!err.is_invalid_argument(), "{call}: {err}");
        assert!(!err.is_connection_error(), "{call}: {err}");
        assert!(
            !testkit::key_exists(&mut raw, "ledger").await,
            "{call}: half an acquire"
        );
    }
    assert_eq!(get(&mut raw, counter).await, Some(i64::MAX.to_string()));
    assert_eq!(client.status().held_locks, 0);
}

#[tokio::test]
async fn fenced_set_compares_tokens_exactly_above_2_pow_53() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    let key = "balance";
    assert!(client
        .fenced_set(key, TWO_POW_53 + 1, b"first")
        .await
        .unwrap());
    assert_eq!(
        get(&mut raw, "redis_rlock_fence:{balance}").await,
        Some((TWO_POW_53 + 1).to_string())
    );
    assert!(
        !client.fenced_set(key, TWO_POW_53, b"stale").await.unwrap(),
        "2^53 passed a fence at 2^53 + 1"
    );
    assert_eq!(get(&mut raw, key).await.as_deref(), Some("first"));
    assert!(client
        .fenced_set(key, TWO_POW_53 + 1, b"same")
        .await
        .unwrap());
    assert!(client
        .fenced_set(key, TWO_POW_53 + 2, b"newer")
        .await
        .unwrap());
    assert!(!client
        .fenced_set(key, TWO_POW_53 + 1, b"old")
        .await
        .unwrap());
    assert_eq!(get(&mut raw, key).await.as_deref(), Some("newer"));
    assert_eq!(
        get(&mut raw, "redis_rlock_fence:{balance}").await,
        Some((TWO_POW_53 + 2).to_string())
    );
}

#[tokio::test]
async fn fenced_set_compares_tokens_exactly_at_u64_max() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    let key = "balance";
    assert!(client.fenced_set(key, u64::MAX, b"max").await.unwrap());
    assert!(
        !client
            .fenced_set(key, u64::MAX - 1, b"stale")
            .await
            .unwrap(),
        "u64::MAX - 1 passed a fence at u64::MAX"
    );
    assert!(!client.fenced_set(key, 0, b"zero").await.unwrap());
    assert!(!client.fenced_set(key, TWO_POW_53, b"low").await.unwrap());
    assert_eq!(get(&mut raw, key).await.as_deref(), Some("max"));
    assert!(client.fenced_set(key, u64::MAX, b"again").await.unwrap());
    assert_eq!(get(&mut raw, key).await.as_deref(), Some("again"));
    assert_eq!(
        get(&mut raw, "redis_rlock_fence:{balance}").await,
        Some(u64::MAX.to_string())
    );
}
