//! Compile-time checks: the types and futures users move between tasks are Send + Sync.

use redis_rlock::{
    Client, CountDownLatch, DistributedLock, ExpirablePermit, FairLock, Fenced, FencedLock,
    LockGuard, PermitExpirableSemaphore, RLock, RedLock, Semaphore, SemaphoreGuard,
};

fn is_send_sync<T: Send + Sync>(_: &T) {}
fn is_send<T: Send>(_: &T) {}

#[allow(dead_code, unused_must_use, clippy::let_underscore_future)]
fn futures_are_send(client: Client, lock: RLock, guard: LockGuard) {
    is_send_sync(&client);
    is_send_sync(&lock);
    is_send_sync(&guard);
    is_send(&Client::connect("redis://127.0.0.1"));
    is_send(&lock.lock());
    is_send(&lock.try_lock_for(std::time::Duration::from_secs(1)));
    is_send(&lock.force_unlock());
    is_send(&lock.hold_count());
    is_send(&guard.lost());
    is_send(&guard.unlock());
}

#[allow(dead_code, unused_must_use, clippy::let_underscore_future)]
fn fair_lock_futures_are_send(lock: FairLock) {
    is_send_sync(&lock);
    is_send(&lock.lock());
    is_send(&lock.try_lock_for(std::time::Duration::from_secs(1)));
    is_send(&lock.force_unlock());
}

#[allow(dead_code, unused_must_use, clippy::let_underscore_future)]
fn fenced_and_group_futures_are_send(
    fenced: FencedLock,
    group: RedLock,
    fenced_group: RedLock<Fenced>,
    client: Client,
) {
    is_send_sync(&fenced);
    is_send(&fenced.lock());
    is_send(&client.fenced_set("k", 1, b"v"));
    is_send_sync(&group);
    is_send(&group.lock());
    is_send(&group.try_lock_for(std::time::Duration::from_secs(1)));
    is_send_sync(&fenced_group);
    is_send(&fenced_group.lock());
}

#[allow(dead_code, unused_must_use, clippy::let_underscore_future)]
fn generic_lock_futures_are_send(lock: impl DistributedLock) {
    is_send_sync(&lock);
    is_send(&lock.lock());
    is_send(&lock.try_lock_with(
        std::time::Duration::from_secs(1),
        std::time::Duration::from_secs(1),
    ));
}

#[allow(dead_code, unused_must_use, clippy::let_underscore_future)]
fn synchronizer_futures_are_send(client: Client, guard: SemaphoreGuard, permit: ExpirablePermit) {
    let wait = std::time::Duration::from_secs(1);
    let semaphore: Semaphore = client.semaphore("s");
    is_send_sync(&semaphore);
    is_send_sync(&guard);
    is_send(&semaphore.acquire(1));
    is_send(&semaphore.try_acquire_for(1, wait));
    is_send(&semaphore.release(1));
    is_send(&guard.release());
    let expirable: PermitExpirableSemaphore = client.permit_expirable_semaphore("p");
    is_send_sync(&expirable);
    is_send_sync(&permit);
    is_send(&expirable.acquire(wait));
    is_send(&expirable.try_acquire_for(wait, wait));
    is_send(&expirable.release_by_id("00"));
    is_send(&permit.lost());
    is_send(&permit.release());
    let latch: CountDownLatch = client.count_down_latch("l");
    is_send_sync(&latch);
    is_send(&latch.wait());
    is_send(&latch.wait_for(wait));
    is_send(&latch.count_down());
}

#[test]
fn compiles() {}
