//! A waiter confirmed listening before the release that should wake it, and how long after
//! that release it returned: the shape of every "woken by the unlock message" test.
//!
//! A waiter that misses the message still gets in, when the holder's lease runs out (30 s
//! with the watchdog) or at its next re-check; only a hand-over far sooner than that shows
//! the message did its job. So the test must know the waiter listens before it releases,
//! and time the waiter from the release. The bound is the caller's: what "far sooner"
//! means depends on the kind and the topology.

use std::future::Future;
use std::time::{Duration, Instant};

use redis_rlock::Client;
use tokio::task::JoinHandle;

/// How long a waiter may take to listen, or to return once released, before the test
/// fails: above every bound the tests assert, so that a slow waiter fails on the caller's
/// assertion, with the time it took.
pub const WAKE_LIMIT: Duration = Duration::from_secs(10);

/// A spawned wait (a lock, a permit, a latch), stamped with the moment it returned.
pub struct Waiting<T> {
    task: JoinHandle<(Instant, T)>,
}

/// What a released waiter returned, and when.
#[derive(Debug)]
pub struct Woken<T> {
    /// What the wait returned (for several waiters, in the order they were given).
    pub value: T,
    /// From the moment the release began to the moment the waiter returned (the last one,
    /// for several).
    pub after: Duration,
    /// How long the release itself took.
    pub release_took: Duration,
}

impl<T> Woken<T> {
    /// From the moment the release returned to the moment the waiter did (zero if the
    /// waiter was first): for a release slow for reasons of its own, such as one
    /// redirected after a failover.
    pub fn after_release_returned(&self) -> Duration {
        self.after.saturating_sub(self.release_took)
    }
}

impl<T: Send + 'static> Waiting<T> {
    /// Spawns `wait`, for a test that confirms in its own way that the waiter listens (on
    /// several clients, on a given node) or that times a release no message announces.
    pub fn spawn(wait: impl Future<Output = T> + Send + 'static) -> Self {
        Self {
            task: tokio::spawn(async move {
                let value = wait.await;
                (Instant::now(), value)
            }),
        }
    }

    /// Spawns `wait`, a call that waits on `client`, and returns once `client` listens on
    /// `channels` unlock channels (Redis confirmed the subscriptions; see
    /// [`Status::subscribed_channels`](redis_rlock::Status::subscribed_channels)), so that
    /// a release from now on is heard.
    pub async fn listening(
        client: &Client,
        channels: usize,
        wait: impl Future<Output = T> + Send + 'static,
    ) -> Self {
        let waiting = Self::spawn(wait);
        crate::eventually(
            &format!("the waiter listens on {channels} channel(s)"),
            WAKE_LIMIT,
            || client.status().subscribed_channels == channels,
        )
        .await;
        waiting
    }

    /// Whether the wait has returned: for a test that shows it has not yet.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Runs `release` (which asserts its own outcome), then waits for the waiter, at most
    /// [`WAKE_LIMIT`].
    pub async fn woken_by(self, release: impl Future<Output = ()>) -> Woken<T> {
        let Woken {
            mut value,
            after,
            release_took,
        } = Self::all_woken_by(vec![self], release).await;
        Woken {
            value: value.pop().expect("one waiter"),
            after,
            release_took,
        }
    }

    /// [`woken_by`](Self::woken_by) for several waiters woken by one release: `after` is
    /// the slowest one's.
    pub async fn all_woken_by(
        waiters: Vec<Self>,
        release: impl Future<Output = ()>,
    ) -> Woken<Vec<T>> {
        let began = Instant::now();
        release.await;
        let release_took = began.elapsed();
        let deadline = tokio::time::Instant::now() + WAKE_LIMIT;
        let mut value = Vec::with_capacity(waiters.len());
        let mut after = Duration::ZERO;
        for waiter in waiters {
            let (returned, got) = match tokio::time::timeout_at(deadline, waiter.task).await {
                Ok(Ok(returned)) => returned,
                Ok(Err(e)) => match e.try_into_panic() {
                    Ok(panic) => std::panic::resume_unwind(panic),
                    Err(e) => panic!("the waiting task did not finish: {e}"),
                },
                Err(_) => panic!("a waiter did not return within {WAKE_LIMIT:?} of its release"),
            };
            after = after.max(returned.saturating_duration_since(began));
            value.push(got);
        }
        Woken {
            value,
            after,
            release_took,
        }
    }
}
