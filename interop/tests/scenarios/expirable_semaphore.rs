//! RPermitExpirableSemaphore (3.52 layout) shared by Redisson and this crate, each scenario
//! both ways: permits set on one side, taken on both, counted on each, with the ids in the
//! raw sorted set; a waiter woken by the other side's release within 500 ms; a permit id
//! released from the other side (and the holder told, or refused, as each side does); a
//! lease running out on one side letting the other side's waiter in without any message; a
//! lease extended on one side (`updateLeaseTime`, `update_lease_time`) kept by the holder on
//! the other, which releases it after its first lease would have run out.

use std::time::Duration;

use redis_rlock::protocol::layout::Derived;
use redis_rlock::{Error, ExpirablePermit, LostReason};
use redis_rlock_interop::check::{report_wake_ups, WAKE_BOUND};
use redis_rlock_interop::synchronizers::{
    call, call_waiting, raw_count, start, taken_permits, SyncKind,
};
use redis_rlock_interop::view::subscribers_become;
use redis_rlock_interop::{figure, now_us, Redisson};
use testkit::RedisServer;

use super::ms;

const GENEROUS: Duration = Duration::from_secs(10);
const ROUNDS: usize = 5;
const PES: SyncKind = SyncKind::Expirable;
const LEASE: Duration = Duration::from_secs(30);
const LEASE_MS: &str = "30000";

fn java_id(reply: redis_rlock_interop::Reply) -> String {
    let value = reply.ok().value;
    value
        .as_str()
        .unwrap_or_else(|| panic!("not a permit id: {value}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_are_shared_and_counted_across() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let java = Redisson::start_default(server.url()).await;
    let rust = testkit::client(&server).await;
    let t1 = java.thread("t1");
    let name = "gpu";
    let gpu = rust.permit_expirable_semaphore(name);

    assert!(call(&t1, PES, "trysetpermits", name, &["3"]).await.bool());
    assert!(!gpu.try_set_permits(5).await.unwrap());
    assert_eq!(gpu.available_permits().await.unwrap(), 3);

    let java_permit = java_id(call(&t1, PES, "acquire", name, &[LEASE_MS]).await);
    let rust_permit = gpu.acquire(LEASE).await.unwrap();
    // Both ids: 16 bytes in the sorted set, shown as 32 hex digits on both sides.
    assert_eq!(java_permit.len(), 32);
    let mut ids: Vec<String> = taken_permits(&mut raw, name)
        .await
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    ids.sort();
    let mut expected = vec![java_permit.clone(), rust_permit.id().to_owned()];
    expected.sort();
    assert_eq!(ids, expected);
    assert_eq!(raw_count(&mut raw, name).await.as_deref(), Some("1"));
    assert_eq!(call(&t1, PES, "available", name, &[]).await.int(), 1);
    assert_eq!(call(&t1, PES, "acquired", name, &[]).await.int(), 2);
    assert_eq!(gpu.acquired_permits().await.unwrap(), 2);

    // The last one, to whichever side asks first; then none for the other.
    let last = gpu.try_acquire(LEASE).await.unwrap().expect("one free");
    let none = call(&t1, PES, "tryacquire", name, &["0", LEASE_MS])
        .await
        .ok();
    assert!(none.value.is_null(), "Java got a permit: {}", none.value);
    last.release().await.unwrap();
    let java_last = java_id(call(&t1, PES, "tryacquire", name, &["0", LEASE_MS]).await);
    assert!(gpu.try_acquire(LEASE).await.unwrap().is_none());

    // Each side releases its own.
    call(&t1, PES, "release", name, &[&java_last]).await.ok();
    call(&t1, PES, "release", name, &[&java_permit]).await.ok();
    rust_permit.release().await.unwrap();
    assert_eq!(call(&t1, PES, "available", name, &[]).await.int(), 3);
    assert!(taken_permits(&mut raw, name).await.is_empty());

    // Set by Rust, seen by Java; permits added across.
    let other = rust.permit_expirable_semaphore("gpu:rust-set");
    assert!(other.try_set_permits(2).await.unwrap());
    assert!(!call(&t1, PES, "trysetpermits", "gpu:rust-set", &["7"])
        .await
        .bool());
    call(&t1, PES, "addpermits", "gpu:rust-set", &["3"])
        .await
        .ok();
    assert_eq!(other.available_permits().await.unwrap(), 5);
    other.add_permits(-1).await.unwrap();
    assert_eq!(
        call(&t1, PES, "available", "gpu:rust-set", &[]).await.int(),
        4
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_release_wakes_a_rust_waiter_within_500_ms() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let java = Redisson::start_default(server.url()).await;
    let rust = testkit::client(&server).await;
    let t1 = java.thread("t1");
    let name = "wake:java-to-rust";
    let channel = Derived::SemaphoreChannel.of(name);
    assert!(call(&t1, PES, "trysetpermits", name, &["1"]).await.bool());

    let mut latencies = Vec::new();
    for _ in 0..ROUNDS {
        let id = java_id(call(&t1, PES, "acquire", name, &[LEASE_MS]).await);
        subscribers_become(&raw, &channel, 0, GENEROUS).await;
        let gpu = rust.permit_expirable_semaphore(name);
        let waiter = tokio::spawn(async move {
            let permit: ExpirablePermit = gpu.acquire(LEASE).await.expect("Rust acquire");
            (now_us(), permit)
        });
        subscribers_become(&raw, &channel, 1, GENEROUS).await;
        let release = call(&t1, PES, "release", name, &[&id]).await.ok();
        let (acquired_us, permit) = tokio::time::timeout(GENEROUS, waiter)
            .await
            .expect("the Rust waiter")
            .unwrap();
        latencies.push(ms(acquired_us - release.start_us));
        permit.release().await.unwrap();
    }
    report_wake_ups("pes.wake_up.java_release_to_rust_ms", &latencies);
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
    let gpu = rust.permit_expirable_semaphore(name);
    assert!(gpu.try_set_permits(1).await.unwrap());

    let mut latencies = Vec::new();
    for _ in 0..ROUNDS {
        let permit = gpu.acquire(LEASE).await.unwrap();
        subscribers_become(&raw, &channel, 0, GENEROUS).await;
        let mut waiting = start(&t1, PES, "acquire", name, &[LEASE_MS]).await;
        subscribers_become(&raw, &channel, 1, GENEROUS).await;
        assert!(waiting.try_now().is_none(), "Java got a permit Rust holds");
        let release_start = now_us();
        permit.release().await.unwrap();
        let acquired = waiting.wait().await;
        let end_us = acquired.end_us;
        let id = java_id(acquired);
        latencies.push(ms(end_us - release_start));
        assert_eq!(taken_permits(&mut raw, name).await[0].0, id);
        call(&t1, PES, "release", name, &[&id]).await.ok();
    }
    report_wake_ups("pes.wake_up.rust_release_to_java_ms", &latencies);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_id_is_released_from_the_other_side() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let java = Redisson::start_default(server.url()).await;
    let rust = testkit::client(&server).await;
    let t1 = java.thread("t1");
    let name = "byid";
    let gpu = rust.permit_expirable_semaphore(name);
    assert!(gpu.try_set_permits(2).await.unwrap());

    // Java takes, Rust releases by Java's id; Java's own release is then refused.
    let id = java_id(call(&t1, PES, "acquire", name, &[LEASE_MS]).await);
    gpu.release_by_id(&id).await.unwrap();
    assert_eq!(raw_count(&mut raw, name).await.as_deref(), Some("2"));
    assert!(!gpu.try_release(&id).await.unwrap());
    let refused = call(&t1, PES, "release", name, &[&id]).await;
    assert!(!refused.ok, "Redisson released a permit twice");
    assert_eq!(refused.error.as_deref(), Some("IllegalArgumentException"));
    let message = refused.message.clone().unwrap_or_default();
    assert!(
        message.contains("has already been released or doesn't exist"),
        "{message}"
    );
    assert!(!call(&t1, PES, "tryrelease", name, &[&id]).await.bool());
    assert_eq!(raw_count(&mut raw, name).await.as_deref(), Some("2"));

    // Rust takes, Java releases by Rust's id (either case of hex); Rust's own release is
    // then refused, and never releases the permit Java takes next.
    let permit = gpu.acquire(LEASE).await.unwrap();
    call(&t1, PES, "release", name, &[permit.id()]).await.ok();
    assert_eq!(raw_count(&mut raw, name).await.as_deref(), Some("2"));
    let next = java_id(call(&t1, PES, "acquire", name, &[LEASE_MS]).await);
    let err = permit.release().await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::PermitLost {
                reason: LostReason::Released,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(raw_count(&mut raw, name).await.as_deref(), Some("1"));
    assert_eq!(taken_permits(&mut raw, name).await[0].0, next);
    let permit = gpu.acquire(LEASE).await.unwrap();
    assert!(
        call(&t1, PES, "tryrelease", name, &[&permit.id().to_uppercase()])
            .await
            .bool()
    );
    assert!(permit.release().await.unwrap_err().is_lock_lost());
    call(&t1, PES, "release", name, &[&next]).await.ok();
    assert_eq!(raw_count(&mut raw, name).await.as_deref(), Some("2"));
    assert!(taken_permits(&mut raw, name).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_running_out_lets_the_other_side_in_without_a_message() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let java = Redisson::start_default(server.url()).await;
    let rust = testkit::client(&server).await;
    let t1 = java.thread("t1");

    // A Java permit of 1 s, never released: a Rust waiter gets it at its expiry.
    let name = "lease:java";
    let gpu = rust.permit_expirable_semaphore(name);
    assert!(gpu.try_set_permits(1).await.unwrap());
    let java_permit = call(&t1, PES, "acquire", name, &["1000"]).await.ok();
    let expiry_ms = java_permit.start_us / 1000 + 1000;
    let permit = gpu.acquire(LEASE).await.unwrap();
    let got_ms = now_us() / 1000;
    assert!(
        got_ms >= expiry_ms - 5,
        "got it {} ms early",
        expiry_ms - got_ms
    );
    let late = got_ms - expiry_ms;
    figure("pes.lease_end.java_to_rust_ms", late as f64);
    assert!(
        late < WAKE_BOUND.as_millis() as i64,
        "{late} ms after the expiry"
    );
    assert_eq!(taken_permits(&mut raw, name).await[0].0, permit.id());
    permit.release().await.unwrap();

    // A Rust permit of 1 s, forgotten: a Java waiter gets it at its expiry.
    let name = "lease:rust";
    let gpu = rust.permit_expirable_semaphore(name);
    assert!(gpu.try_set_permits(1).await.unwrap());
    let started_us = now_us();
    let _kept = gpu
        .acquire(Duration::from_millis(1000))
        .await
        .unwrap()
        .forget();
    let got = call_waiting(
        &t1,
        PES,
        "acquire",
        name,
        &[LEASE_MS],
        Duration::from_secs(2),
    )
    .await;
    let late = got.end_us / 1000 - (started_us / 1000 + 1000);
    assert!(late >= -5, "got it {} ms early", -late);
    figure("pes.lease_end.rust_to_java_ms", late as f64);
    assert!(
        late < WAKE_BOUND.as_millis() as i64,
        "{late} ms after the expiry"
    );
    let id = java_id(got);
    assert_eq!(taken_permits(&mut raw, name).await[0].0, id);
}

/// Redisson's `updateLeaseTime` on a Rust permit, 2 s extended to 8 s: the Rust guard's
/// `lost()` does not say `Expired` at 2 s (Redis has the new lease), and its release at 3 s
/// frees the permit, for Java to take at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_java_extends_is_kept_and_released_by_the_rust_holder() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let java = Redisson::start_default(server.url()).await;
    let rust = testkit::client(&server).await;
    let t1 = java.thread("t1");
    let name = "extended-by-java";
    let gpu = rust.permit_expirable_semaphore(name);
    assert!(gpu.try_set_permits(1).await.unwrap());
    let permit = gpu.acquire(Duration::from_secs(2)).await.unwrap();
    let lost = tokio::spawn(permit.lost());
    assert!(call(&t1, PES, "updatelease", name, &[permit.id(), "8000"])
        .await
        .bool());
    tokio::time::sleep_until((permit.valid_until() + Duration::from_millis(800)).into()).await;
    assert!(
        !lost.is_finished(),
        "lost() said the permit expired: Java extended it"
    );
    assert!(!permit.is_lost());
    permit.release().await.unwrap();
    assert_eq!(raw_count(&mut raw, name).await.as_deref(), Some("1"));
    let next = call(&t1, PES, "tryacquire", name, &["0", LEASE_MS]).await;
    assert!(
        next.ok().value.is_string(),
        "Java could not take the freed permit"
    );
    lost.abort();
}

/// This crate's `update_lease_time` by id on a Java permit, 2 s extended to 8 s: Redisson
/// releases it at 3 s as its own (its lease had not run out in Redis), and a Rust waiter
/// is not let in meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_rust_extends_is_kept_and_released_by_the_java_holder() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let java = Redisson::start_default(server.url()).await;
    let rust = testkit::client(&server).await;
    let t1 = java.thread("t1");
    let name = "extended-by-rust";
    let gpu = rust.permit_expirable_semaphore(name);
    assert!(gpu.try_set_permits(1).await.unwrap());
    let id = java_id(call(&t1, PES, "acquire", name, &["2000"]).await);
    assert!(gpu
        .update_lease_time(&id, Duration::from_secs(8))
        .await
        .unwrap());
    let left = taken_permits(&mut raw, name).await[0].1 - testkit::server_millis(&mut raw).await;
    assert!((7_000..=8_000).contains(&left), "{left} ms left in Redis");
    // Past the first lease: still Java's, so a Rust try finds nothing free.
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    assert!(gpu.try_acquire(LEASE).await.unwrap().is_none());
    assert!(call(&t1, PES, "tryrelease", name, &[&id]).await.bool());
    assert_eq!(raw_count(&mut raw, name).await.as_deref(), Some("1"));
    // An id nobody holds: false on both sides.
    assert!(!gpu
        .update_lease_time(&id, Duration::from_secs(8))
        .await
        .unwrap());
    assert!(!call(&t1, PES, "updatelease", name, &[&id, "8000"])
        .await
        .bool());
}
