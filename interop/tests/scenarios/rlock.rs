//! RLock shared by Redisson and this crate, each scenario both ways (Java holds and Rust
//! waits, and the reverse): wake-up by the unlock message within 500 ms of the unlock;
//! busy for the other side; a fixed lease running out letting a waiter of the other side in
//! without any message; re-entry counts as raw commands see them; watchdog renewals seen
//! from the other side; force unlock across; mutual exclusion of Java threads and Rust tasks
//! on one counter.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use redis_rlock::protocol::layout::Derived;
use redis_rlock::{LockGuard, LostReason};
use redis_rlock_interop::check::{count_renewals, exclusive_rounds, report_wake_ups, within};
use redis_rlock_interop::view::{is_owner_field, subscribers_become};
use redis_rlock_interop::{figure, now_us, Kind, Redisson, RedissonOptions};
use testkit::{key_exists, lock_hash, pttl, RedisServer};

use super::ms;

/// For state that settles quickly (a subscription, a key), on a loaded machine.
const GENEROUS: Duration = Duration::from_secs(10);
const ROUNDS: usize = 5;
/// A short watchdog lease, so that renewals can be watched within seconds: renewed every
/// 500 ms on both sides.
const SHORT_WATCHDOG: Duration = Duration::from_millis(1500);

pub(super) fn hash_of(owner: &str, count: i64) -> HashMap<String, i64> {
    HashMap::from([(owner.to_owned(), count)])
}

/// Spawns a Rust task that takes `name` with `lock()`; it returns the wall-clock time it
/// got the lock, and the guard.
fn rust_waiter(
    client: &redis_rlock::Client,
    name: &str,
) -> tokio::task::JoinHandle<(i64, LockGuard)> {
    let lock = client.lock(name);
    tokio::spawn(async move {
        let guard = lock.lock().await.expect("Rust lock()");
        (now_us(), guard)
    })
}

/// A Rust task that takes `name` and hands back its guard (the task ends, the guard lives).
pub(super) async fn rust_holds(client: &redis_rlock::Client, name: &str) -> LockGuard {
    let lock = client.lock(name);
    tokio::spawn(async move { lock.lock().await.expect("Rust lock()") })
        .await
        .expect("the locking task")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_unlock_wakes_a_rust_waiter_within_500_ms() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let java = Redisson::start_default(server.url()).await;
    let rust = testkit::client(&server).await;
    let t1 = java.thread("t1");
    let name = "wake:java-to-rust";
    let channel = Derived::UnlockChannel.of(name);

    let mut latencies = Vec::new();
    for _ in 0..ROUNDS {
        t1.lock(Kind::Lock, name).await;
        // The last round's subscription gone, so that the count below is this waiter's.
        subscribers_become(&raw, &channel, 0, GENEROUS).await;
        let waiter = rust_waiter(&rust, name);
        subscribers_become(&raw, &channel, 1, GENEROUS).await;

        let unlock = t1.unlock(Kind::Lock, name).await.ok();
        let (acquired_us, guard) = within("the Rust waiter", GENEROUS, waiter).await.unwrap();
        latencies.push(ms(acquired_us - unlock.start_us));
        // Woken by the message, not by the Java lease (30 s) running out; held by the Rust
        // task now, under the Rust watchdog's lease.
        assert_eq!(lock_hash(&mut raw, name).await, hash_of(guard.owner(), 1));
        assert!(pttl(&mut raw, name).await > 20_000);
        guard.unlock().await.unwrap();
    }
    report_wake_ups("rlock.wake_up.java_unlock_to_rust_ms", &latencies);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_unlock_wakes_a_java_waiter_within_500_ms() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let java = Redisson::start_default(server.url()).await;
    let rust = testkit::client(&server).await;
    let t1 = java.thread("t1");
    let owner = t1.owner().await;
    let name = "wake:rust-to-java";
    let channel = Derived::UnlockChannel.of(name);

    let mut latencies = Vec::new();
    for _ in 0..ROUNDS {
        let guard = rust_holds(&rust, name).await;
        subscribers_become(&raw, &channel, 0, GENEROUS).await;
        let mut waiting = t1.start_lock(Kind::Lock, name).await;
        subscribers_become(&raw, &channel, 1, GENEROUS).await;
        assert!(waiting.try_now().is_none(), "Java got a lock Rust holds");

        let unlock_start = now_us();
        guard.unlock().await.unwrap();
        let acquired = waiting.wait().await.ok();
        latencies.push(ms(acquired.end_us - unlock_start));
        assert_eq!(lock_hash(&mut raw, name).await, hash_of(&owner, 1));
        assert!(pttl(&mut raw, name).await > 20_000);
        t1.unlock(Kind::Lock, name).await.ok();
    }
    report_wake_ups("rlock.wake_up.rust_unlock_to_java_ms", &latencies);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_java_holds_is_busy_for_rust() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let java = Redisson::start_default(server.url()).await;
    let rust = testkit::client(&server).await;
    let t1 = java.thread("t1");
    let name = "busy:java-holds";

    t1.lock(Kind::Lock, name).await;
    // Redisson's layout: one field `<client id>:<thread id>` -> 1, the 30 s watchdog lease.
    let owner = t1.owner().await;
    assert!(is_owner_field(&owner), "{owner}");
    assert_eq!(lock_hash(&mut raw, name).await, hash_of(&owner, 1));
    assert!((20_000..=30_000).contains(&pttl(&mut raw, name).await));

    let lock = rust.lock(name);
    let (busy, timed) = tokio::spawn(async move {
        let busy = lock.try_lock().await.unwrap().is_none();
        let start = Instant::now();
        let timed = lock
            .try_lock_for(Duration::from_millis(300))
            .await
            .unwrap()
            .is_none();
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_millis(290),
            "gave up after {waited:?}"
        );
        assert!(lock.is_locked().await.unwrap());
        assert!(!lock.is_held_by_current_task().await.unwrap());
        assert_eq!(lock.hold_count().await.unwrap(), 0);
        let ttl = lock.remaining_ttl().await.unwrap().expect("a lease");
        assert!(ttl > Duration::from_secs(20), "{ttl:?}");
        (busy, timed)
    })
    .await
    .unwrap();
    assert!(busy && timed, "Rust got a lock Java holds");
    assert_eq!(lock_hash(&mut raw, name).await, hash_of(&owner, 1));

    t1.unlock(Kind::Lock, name).await.ok();
    assert!(!key_exists(&mut raw, name).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_rust_holds_is_busy_for_java() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let java = Redisson::start_default(server.url()).await;
    let rust = testkit::client(&server).await;
    let t1 = java.thread("t1");
    let name = "busy:rust-holds";

    let guard = rust_holds(&rust, name).await;
    assert!(is_owner_field(guard.owner()), "{}", guard.owner());
    assert_eq!(lock_hash(&mut raw, name).await, hash_of(guard.owner(), 1));

    assert!(!t1.try_lock(Kind::Lock, name, Duration::ZERO).await.bool());
    let timed = t1
        .try_lock(Kind::Lock, name, Duration::from_millis(300))
        .await;
    let waited = timed.end_us - timed.start_us;
    assert!(!timed.bool(), "Java got a lock Rust holds");
    assert!(waited >= 290_000, "gave up after {waited} us");
    assert!(t1.is_locked(Kind::Lock, name).await);
    assert!(!t1.is_held(Kind::Lock, name).await);
    assert_eq!(t1.hold_count(Kind::Lock, name).await, 0);
    assert!(t1.ttl(Kind::Lock, name).await > 20_000);
    // Not Java's lock to release: Redisson refuses, and the Rust hold is untouched.
    let refused = t1.unlock(Kind::Lock, name).await;
    assert_eq!(
        refused.error.as_deref(),
        Some("IllegalMonitorStateException")
    );
    assert_eq!(lock_hash(&mut raw, name).await, hash_of(guard.owner(), 1));

    guard.unlock().await.unwrap();
    assert!(t1.try_lock(Kind::Lock, name, Duration::ZERO).await.bool());
    t1.unlock(Kind::Lock, name).await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_reentry_counts_as_raw_commands_and_rust_see_them() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let java = Redisson::start_default(server.url()).await;
    let rust = testkit::client(&server).await;
    let t1 = java.thread("t1");
    let owner = t1.owner().await;
    let name = "reentry:java";

    t1.lock(Kind::Lock, name).await;
    t1.lock(Kind::Lock, name).await;
    assert_eq!(lock_hash(&mut raw, name).await, hash_of(&owner, 2));
    assert_eq!(t1.hold_count(Kind::Lock, name).await, 2);
    let lock = rust.lock(name);
    assert!(lock.try_lock().await.unwrap().is_none());

    t1.unlock(Kind::Lock, name).await.ok();
    assert_eq!(lock_hash(&mut raw, name).await, hash_of(&owner, 1));
    assert!(
        lock.try_lock().await.unwrap().is_none(),
        "one Java hold left"
    );
    t1.unlock(Kind::Lock, name).await.ok();
    assert!(!key_exists(&mut raw, name).await);
    let guard = lock
        .try_lock()
        .await
        .unwrap()
        .expect("free after the last Java unlock");
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_reentry_counts_as_raw_commands_and_java_see_them() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let java = Redisson::start_default(server.url()).await;
    let rust = testkit::client(&server).await;
    let t1 = java.thread("t1");
    let name = "reentry:rust";

    let lock = rust.lock(name);
    let (outer, inner) = tokio::spawn(async move {
        let outer = lock.lock().await.unwrap();
        let inner = lock.lock().await.unwrap();
        (outer, inner)
    })
    .await
    .unwrap();
    assert_eq!(outer.owner(), inner.owner());
    assert_eq!(lock_hash(&mut raw, name).await, hash_of(outer.owner(), 2));
    assert!(t1.is_locked(Kind::Lock, name).await);
    assert_eq!(t1.hold_count(Kind::Lock, name).await, 0);
    assert!(!t1.try_lock(Kind::Lock, name, Duration::ZERO).await.bool());

    inner.unlock().await.unwrap();
    assert_eq!(lock_hash(&mut raw, name).await, hash_of(outer.owner(), 1));
    assert!(!t1.try_lock(Kind::Lock, name, Duration::ZERO).await.bool());
    outer.unlock().await.unwrap();
    assert!(!key_exists(&mut raw, name).await);
    assert!(t1.try_lock(Kind::Lock, name, Duration::ZERO).await.bool());
    t1.unlock(Kind::Lock, name).await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_lease_running_out_lets_a_rust_waiter_in_without_a_message() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let java = Redisson::start_default(server.url()).await;
    let rust = testkit::client(&server).await;
    let t1 = java.thread("t1");
    let (name, channel) = ("lease:java", Derived::UnlockChannel.of("lease:java"));

    // A first call warms the JVM up, so that the lease's own call is quick: the figure is
    // taken from that call's start.
    t1.lock(Kind::Lock, "warm-up").await;
    t1.unlock(Kind::Lock, "warm-up").await.ok();
    // A fixed 1 s lease, never unlocked: no message will come, only the TTL bounds the wait.
    let locked = t1
        .call(&[Kind::Lock.word(), "lock", name, "1000"])
        .await
        .ok();
    // The lease began during the call: from its start, the earliest it can end.
    let lease_end_us = locked.start_us + 1_000_000;
    let waiter = rust_waiter(&rust, name);
    subscribers_become(&raw, &channel, 1, GENEROUS).await;
    let (acquired_us, guard) = within("the Rust waiter", GENEROUS, waiter).await.unwrap();
    let late = ms(acquired_us - lease_end_us);
    figure("rlock.lease_end.java_lease_to_rust_ms", late);
    assert!(
        late >= 0.0,
        "the Rust waiter got in {:.1} ms before the lease ended",
        -late
    );
    assert!(
        late < 500.0,
        "the Rust waiter got in {late:.1} ms after the lease ended"
    );
    assert_eq!(lock_hash(&mut raw, name).await, hash_of(guard.owner(), 1));
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_lease_running_out_lets_a_java_waiter_in_without_a_message() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let java = Redisson::start_default(server.url()).await;
    let rust = testkit::client(&server).await;
    let t1 = java.thread("t1");
    let owner = t1.owner().await;
    let (name, channel) = ("lease:rust", Derived::UnlockChannel.of("lease:rust"));

    rust_holds(&rust, "warm-up").await.unlock().await.unwrap();
    let lock = rust.lock(name);
    // From the call's start: the earliest the lease can end.
    let lease_end_us = now_us() + 1_000_000;
    let guard =
        tokio::spawn(async move { lock.lock_with_lease(Duration::from_secs(1)).await.unwrap() })
            .await
            .unwrap();
    let waiting = t1.start_lock(Kind::Lock, name).await;
    subscribers_become(&raw, &channel, 1, GENEROUS).await;
    let acquired = waiting.wait().await.ok();
    let late = ms(acquired.end_us - lease_end_us);
    figure("rlock.lease_end.rust_lease_to_java_ms", late);
    assert!(
        late >= 0.0,
        "the Java waiter got in {:.1} ms before the lease ended",
        -late
    );
    assert!(
        late < 500.0,
        "the Java waiter got in {late:.1} ms after the lease ended"
    );
    assert_eq!(lock_hash(&mut raw, name).await, hash_of(&owner, 1));
    // The Rust holder is told, and its unlock leaves the Java hold alone.
    assert_eq!(
        within("lost()", GENEROUS, guard.lost()).await,
        LostReason::Expired
    );
    assert!(guard.unlock().await.unwrap_err().is_lock_lost());
    assert_eq!(lock_hash(&mut raw, name).await, hash_of(&owner, 1));
    t1.unlock(Kind::Lock, name).await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_sees_the_redisson_watchdog_renew_a_java_lock() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let java = RedissonOptions::new(server.url())
        .watchdog(SHORT_WATCHDOG)
        .start()
        .await;
    let rust = testkit::client(&server).await;
    let t1 = java.thread("t1");
    let name = "watchdog:java";

    t1.lock(Kind::Lock, name).await;
    // Three leases: without renewals the key would be gone twice over.
    let renewals = count_renewals(SHORT_WATCHDOG * 3, || {
        let mut raw = raw.clone();
        async move { pttl(&mut raw, name).await }
    })
    .await;
    assert!(renewals >= 4, "{renewals} renewals in three leases");
    figure("rlock.watchdog.java_renewals_per_3_leases", renewals as f64);
    assert!(rust.lock(name).try_lock().await.unwrap().is_none());

    t1.unlock(Kind::Lock, name).await.ok();
    assert!(!key_exists(&mut raw.clone(), name).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_sees_the_rust_watchdog_renew_a_rust_lock() {
    let server = RedisServer::start();
    let java = Redisson::start_default(server.url()).await;
    let rust = testkit::client_with_watchdog(&server, SHORT_WATCHDOG).await;
    let t1 = java.thread("t1");
    let name = "watchdog:rust";

    let guard = rust_holds(&rust, name).await;
    let renewals = count_renewals(SHORT_WATCHDOG * 3, || t1.ttl(Kind::Lock, name)).await;
    assert!(renewals >= 4, "{renewals} renewals in three leases");
    figure("rlock.watchdog.rust_renewals_per_3_leases", renewals as f64);
    assert!(!t1.try_lock(Kind::Lock, name, Duration::ZERO).await.bool());

    guard.unlock().await.unwrap();
    assert!(!t1.is_locked(Kind::Lock, name).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_force_unlock_frees_a_rust_hold_and_wakes_a_java_waiter() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let java = Redisson::start_default(server.url()).await;
    let rust = testkit::client_with_watchdog(&server, SHORT_WATCHDOG).await;
    let (t1, t2) = (java.thread("t1"), java.thread("t2"));
    let t2_owner = t2.owner().await;
    let (name, channel) = ("force:java", Derived::UnlockChannel.of("force:java"));

    let guard = rust_holds(&rust, name).await;
    let waiting = t2.start_lock(Kind::Lock, name).await;
    subscribers_become(&raw, &channel, 1, GENEROUS).await;

    let forced = t1.request(&[Kind::Lock.word(), "forceunlock", name]).await;
    let forced = forced.wait().await;
    assert!(forced.clone().bool());
    let acquired = waiting.wait().await.ok();
    report_wake_ups(
        "rlock.wake_up.java_force_unlock_to_java_ms",
        &[ms(acquired.end_us - forced.start_us)],
    );
    assert_eq!(lock_hash(&mut raw, name).await, hash_of(&t2_owner, 1));

    // The Rust holder finds out at its next renewal (every 500 ms here), and its unlock
    // leaves the Java hold alone.
    let reason = within("lost()", GENEROUS, guard.lost()).await;
    assert_eq!(reason, LostReason::Released);
    let err = guard.unlock().await.unwrap_err();
    assert!(err.is_lock_lost(), "{err}");
    assert_eq!(lock_hash(&mut raw, name).await, hash_of(&t2_owner, 1));
    t2.unlock(Kind::Lock, name).await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_force_unlock_frees_a_java_hold_and_wakes_a_rust_waiter() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let java = RedissonOptions::new(server.url())
        .watchdog(SHORT_WATCHDOG)
        .start()
        .await;
    let rust = testkit::client(&server).await;
    let t1 = java.thread("t1");
    let (name, channel) = ("force:rust", Derived::UnlockChannel.of("force:rust"));

    t1.lock(Kind::Lock, name).await;
    let waiter = rust_waiter(&rust, name);
    subscribers_become(&raw, &channel, 1, GENEROUS).await;

    let forced_at = now_us();
    assert!(rust.lock(name).force_unlock().await.unwrap());
    let (acquired_us, guard) = within("the Rust waiter", GENEROUS, waiter).await.unwrap();
    report_wake_ups(
        "rlock.wake_up.rust_force_unlock_to_rust_ms",
        &[ms(acquired_us - forced_at)],
    );
    assert!(!t1.is_held(Kind::Lock, name).await);

    // Redisson's watchdog finds its field gone and stops; it never touches the new hold,
    // and the Java unlock is refused.
    tokio::time::sleep(SHORT_WATCHDOG).await;
    assert_eq!(lock_hash(&mut raw, name).await, hash_of(guard.owner(), 1));
    assert!(pttl(&mut raw, name).await > 20_000, "the Rust lease");
    let refused = t1.unlock(Kind::Lock, name).await;
    assert_eq!(
        refused.error.as_deref(),
        Some("IllegalMonitorStateException")
    );
    assert_eq!(lock_hash(&mut raw, name).await, hash_of(guard.owner(), 1));
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_threads_and_rust_tasks_exclude_each_other_on_one_counter() {
    const ROUNDS_EACH: usize = 25;
    const JAVA_THREADS: usize = 3;
    const RUST_TASKS: usize = 3;
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let java = Redisson::start_default(server.url()).await;
    let rust = testkit::client(&server).await;
    let (name, counter) = ("exclusive", "exclusive:counter");

    // Java: each thread runs the workload in the driver (lock; INCR inside; GET; SET + 1;
    // DECR inside; unlock), so its rounds are not slowed by the pipe.
    let rounds = ROUNDS_EACH.to_string();
    let mut java_runs = Vec::new();
    for i in 0..JAVA_THREADS {
        let thread = java.thread(&format!("worker{i}"));
        java_runs.push(
            thread
                .request(&["lock", "exclusive", name, counter, &rounds])
                .await,
        );
    }
    // Rust: the same workload with raw commands.
    let mut rust_runs = Vec::new();
    for _ in 0..RUST_TASKS {
        let (lock, conn) = (rust.lock(name), raw.clone());
        rust_runs.push(tokio::spawn(exclusive_rounds(
            lock,
            conn,
            counter,
            ROUNDS_EACH,
        )));
    }

    let limit = Duration::from_secs(120);
    let mut overlaps = 0;
    for run in java_runs {
        overlaps += run.wait_for(limit).await.int();
    }
    for run in rust_runs {
        overlaps += within("a Rust task", limit, run).await.unwrap();
    }
    assert_eq!(overlaps, 0, "critical sections overlapped");
    let total: i64 = redis::cmd("GET")
        .arg(counter)
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(
        total,
        ((JAVA_THREADS + RUST_TASKS) * ROUNDS_EACH) as i64,
        "lost updates"
    );
    assert!(!key_exists(&mut raw, name).await);
}
