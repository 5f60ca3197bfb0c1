//! One hold of every kind, and another client's waiters on each: what a client's shutdown
//! must release, and who must get in at once when it does.

use std::time::Duration;

use redis_rlock::{Client, ExpirablePermit, LockGuard, SemaphoreGuard};

/// Milliseconds since the Unix epoch: comparable between this process and a child.
pub fn unix_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is past 1970")
        .as_millis()
}

/// Permits the shutting-down client takes all of, so that others wait for them.
pub const SEMAPHORE_PERMITS: u64 = 2;

/// One hold of every kind, as a service would have them when it is told to stop.
pub struct Holdings {
    /// A watchdog lock, taken twice (a re-entry is a guard of its own).
    pub watchdog: [LockGuard; 2],
    pub fixed_lease: LockGuard,
    pub fair: LockGuard,
    pub read: LockGuard,
    pub write: LockGuard,
    pub permits: SemaphoreGuard,
    pub permit: ExpirablePermit,
    /// A wait in the queue of fair lock `fair-queued`, which someone else holds.
    pub queued: tokio::task::JoinHandle<redis_rlock::Result<LockGuard>>,
}

/// Guards handed out in all: the shutdown reports each as released.
pub const GUARDS_HELD: usize = 8;

pub async fn hold_everything(client: &Client) -> Holdings {
    let watchdog = [
        client.lock("watchdog").lock().await.unwrap(),
        client.lock("watchdog").lock().await.unwrap(),
    ];
    let fixed_lease = client
        .lock("fixed-lease")
        .lock_with_lease(Duration::from_secs(60))
        .await
        .unwrap();
    let fair = client.fair_lock("fair").lock().await.unwrap();
    let read = client
        .read_write_lock("read")
        .read_lock()
        .lock()
        .await
        .unwrap();
    let write = client
        .read_write_lock("write")
        .write_lock()
        .lock()
        .await
        .unwrap();
    let permits = client
        .semaphore("permits")
        .acquire(SEMAPHORE_PERMITS)
        .await
        .unwrap();
    let permit = client
        .permit_expirable_semaphore("permit")
        .acquire(Duration::from_secs(60))
        .await
        .unwrap();
    let queued = tokio::spawn({
        let lock = client.fair_lock("fair-queued");
        async move { lock.lock().await }
    });
    Holdings {
        watchdog,
        fixed_lease,
        fair,
        read,
        write,
        permits,
        permit,
        queued,
    }
}

/// Sets the semaphores' permits and takes `fair-queued`, before the holder starts.
pub async fn prepare(other: &Client) -> LockGuard {
    assert!(other
        .semaphore("permits")
        .try_set_permits(SEMAPHORE_PERMITS)
        .await
        .unwrap());
    assert!(other
        .permit_expirable_semaphore("permit")
        .try_set_permits(1)
        .await
        .unwrap());
    other.fair_lock("fair-queued").lock().await.unwrap()
}

/// How many unlock channels [`wait_on_everything`]'s waiters subscribe to.
pub const WAITER_CHANNELS: usize = 7;

/// `other`'s waiters on everything [`hold_everything`] holds, each returning when (Unix
/// ms) it got in; returns once all of them listen.
pub async fn wait_on_everything(
    other: &Client,
) -> Vec<(&'static str, tokio::task::JoinHandle<u128>)> {
    let base = other.status().subscribed_channels;
    let mut waiters = Vec::new();
    macro_rules! waiter {
        ($name:literal, $acquire:expr) => {{
            let other = other.clone();
            waiters.push((
                $name,
                tokio::spawn(async move {
                    let guard = $acquire(other).await;
                    let at = unix_ms();
                    drop(guard);
                    at
                }),
            ));
        }};
    }
    waiter!("watchdog", |c: Client| async move {
        c.lock("watchdog").lock().await.unwrap()
    });
    waiter!("fixed-lease", |c: Client| async move {
        c.lock("fixed-lease").lock().await.unwrap()
    });
    waiter!("fair", |c: Client| async move {
        c.fair_lock("fair").lock().await.unwrap()
    });
    waiter!("read", |c: Client| async move {
        c.read_write_lock("read").write_lock().lock().await.unwrap()
    });
    waiter!("write", |c: Client| async move {
        c.read_write_lock("write").read_lock().lock().await.unwrap()
    });
    waiter!("permits", |c: Client| async move {
        c.semaphore("permits").acquire(1).await.unwrap()
    });
    waiter!("permit", |c: Client| async move {
        c.permit_expirable_semaphore("permit")
            .acquire(Duration::from_secs(60))
            .await
            .unwrap()
    });
    crate::eventually("every waiter listens", Duration::from_secs(10), || {
        other.status().subscribed_channels >= base + WAITER_CHANNELS
    })
    .await;
    waiters
}

/// Every waiter got in within 100 ms of the shutdown's end (`released_at`, Unix ms).
pub async fn waiters_woke(
    waiters: Vec<(&'static str, tokio::task::JoinHandle<u128>)>,
    released_at: u128,
) {
    for (name, waiter) in waiters {
        let got_in = crate::bounded(name, waiter).await.unwrap();
        assert!(
            got_in <= released_at + 100,
            "the waiter on `{name}` got in {} ms after the shutdown returned",
            got_in - released_at
        );
    }
}

/// The whole scenario on any topology: `other` prepares and waits, `holder` holds
/// everything and shuts down; every waiter gets in within 100 ms, the holder's queued wait
/// ends with `Error::ShutDown`, and its guards say they lost to the shutdown.
pub async fn shutdown_releases_everything(holder: &Client, other: &Client) {
    let held_by_other = prepare(other).await;
    let holdings = hold_everything(holder).await;
    crate::eventually(
        "the holder waits in the fair queue",
        Duration::from_secs(10),
        || holder.status().queued_waiters == 1,
    )
    .await;
    let waiters = wait_on_everything(other).await;
    let report = holder.shutdown(Duration::from_secs(10)).await;
    let released_at = unix_ms();
    assert!(report.is_complete(), "{report:?}");
    assert_eq!(report.released, GUARDS_HELD, "{report:?}");
    waiters_woke(waiters, released_at).await;
    let queued = crate::bounded("the queued wait", holdings.queued)
        .await
        .unwrap();
    assert!(queued.unwrap_err().is_shut_down());
    assert_eq!(
        crate::bounded("lost()", holdings.watchdog[0].lost()).await,
        redis_rlock::LostReason::ShutDown
    );
    held_by_other.unlock().await.unwrap();
}
