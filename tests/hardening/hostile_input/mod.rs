//! Hostile and out-of-range input: settings, leases, caps and names outside their ranges are
//! refused at once with `InvalidArgument` and nothing sent; keys that hold other data (a
//! string, a hash of user data, a list, a Redisson read-write lock) are refused with
//! `NotALock` and left exactly as they were; fencing tokens stay exact over their whole
//! range.
//!
//! One file per kind of input: `settings.rs` (the client builder's), `leases.rs` (leases and
//! hold caps), `names.rs` (lock names and fenced-write keys), `foreign_keys.rs` (a lock name
//! on a key that holds other data), `damaged_locks.rs` (a lock's queue, timeout or counter
//! key of the wrong type, a held lock overwritten) and `fencing_tokens.rs` (tokens near 2^53
//! and at the ends of their range). This file holds what they share: the allocation
//! tracker, the ranges' edges, the expected refusals, raw key access and the tables of lock
//! kinds and foreign data.

mod damaged_locks;
mod fencing_tokens;
mod foreign_keys;
mod leases;
mod names;
mod settings;

use std::alloc::{GlobalAlloc, Layout, System};
use std::fmt::Debug;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis_rlock::{Client, Error};

/// The largest single allocation this test process asked for, so that a setting that
/// would make the library allocate a huge buffer is caught even when it fails. It counts
/// for the whole `hardening` binary: none of its other files allocates anywhere near the
/// bound checked.
struct TrackingAllocator;

/// The largest size [`TrackingAllocator`] was asked for so far, in bytes.
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

/// Every allocation of the `hardening` binary goes through [`TrackingAllocator`].
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

/// One nanosecond: the step just outside a range's edge.
const NS: Duration = Duration::from_nanos(1);

/// Asserts that `result` is a refusal with `InvalidArgument`.
fn expect_invalid<T: Debug>(what: &str, result: redis_rlock::Result<T>) {
    match result {
        Err(e) => assert!(e.is_invalid_argument(), "{what}: {e}"),
        Ok(value) => panic!("{what}: accepted ({value:?})"),
    }
}

/// Asserts that `result` is a refusal with `NotALock`, and returns the error.
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

/// `GET` of `key`, raw.
async fn get(conn: &mut MultiplexedConnection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query_async(conn).await.unwrap()
}

/// `SET` of `key` to `value`, raw.
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

/// Every kind of [`Foreign`] data.
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

    /// `lock_with_lease` of the lock inside.
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

    /// `try_lock_with` of the lock inside.
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

    /// Every acquire call of the lock inside (see `testkit::every_acquire`).
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
