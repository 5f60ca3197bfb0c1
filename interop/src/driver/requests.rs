//! A request sent and not yet answered, and the logical Java threads requests run on.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use super::output::Shared;
use super::REPLY_LIMIT;
use super::{Kind, Redisson, Reply};

/// A request sent and not yet answered.
pub struct Pending {
    pub(super) what: String,
    pub(super) rx: oneshot::Receiver<Reply>,
    pub(super) shared: Arc<Shared>,
}

impl Pending {
    /// The reply, within [`REPLY_LIMIT`].
    ///
    /// # Panics
    ///
    /// When it does not come in time, or the driver exits first.
    pub async fn wait(self) -> Reply {
        self.wait_for(REPLY_LIMIT).await
    }

    /// The reply, within `limit`.
    ///
    /// # Panics
    ///
    /// When it does not come in time, or the driver exits first.
    pub async fn wait_for(self, limit: Duration) -> Reply {
        match tokio::time::timeout(limit, self.rx).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => panic!(
                "the Redisson driver exited before answering `{}`:\n{}",
                self.what,
                self.shared.stderr_tail()
            ),
            Err(_) => panic!(
                "the Redisson driver did not answer `{}` within {limit:?}:\n{}",
                self.what,
                self.shared.stderr_tail()
            ),
        }
    }

    /// The reply if it came already: `None` while the call is still running (a `lock()`
    /// still waiting).
    ///
    /// # Panics
    ///
    /// When the driver exited without answering.
    pub fn try_now(&mut self) -> Option<Reply> {
        match self.rx.try_recv() {
            Ok(reply) => Some(reply),
            Err(oneshot::error::TryRecvError::Empty) => None,
            Err(oneshot::error::TryRecvError::Closed) => panic!(
                "the Redisson driver exited before answering `{}`:\n{}",
                self.what,
                self.shared.stderr_tail()
            ),
        }
    }
}

/// A logical Java thread of one driver: the unit of lock ownership on the Java side.
pub struct JavaThread<'a> {
    pub(super) driver: &'a Redisson,
    pub(super) name: String,
}

impl JavaThread<'_> {
    /// Sends a request on this thread; await the reply through the [`Pending`].
    pub async fn request(&self, words: &[&str]) -> Pending {
        self.driver.request(&self.name, words).await
    }

    /// Sends a request on this thread and awaits its reply, within [`REPLY_LIMIT`].
    pub async fn call(&self, words: &[&str]) -> Reply {
        self.request(words).await.wait().await
    }

    /// The Java thread id behind this logical thread.
    pub async fn thread_id(&self) -> u64 {
        self.call(&["ping"]).await.ok().thread_id
    }

    /// The hash field Redisson writes for this thread: `<client id>:<thread id>`.
    pub async fn owner(&self) -> String {
        format!("{}:{}", self.driver.client_id(), self.thread_id().await)
    }

    /// Starts `lock()` (a fenced lock: `lockAndGetToken()`), which may block; the reply
    /// comes when it returns.
    pub async fn start_lock(&self, kind: Kind, name: &str) -> Pending {
        self.request(&[kind.word(), "lock", name]).await
    }

    /// `lock()` (a fenced lock: `lockAndGetToken()`, the token as the value), which must
    /// return within [`REPLY_LIMIT`] and not throw.
    pub async fn lock(&self, kind: Kind, name: &str) -> Reply {
        self.start_lock(kind, name).await.wait().await.ok()
    }

    /// `tryLock(wait, -1)` (a fenced lock: `tryLockAndGetToken`): whether it got the lock
    /// (a token or null for a fenced lock).
    pub async fn try_lock(&self, kind: Kind, name: &str, wait: Duration) -> Reply {
        let wait = wait.as_millis().to_string();
        self.request(&[kind.word(), "trylock", name, &wait])
            .await
            .wait_for(REPLY_LIMIT + Duration::from_millis(wait.parse().unwrap_or(0)))
            .await
            .ok()
    }

    /// `unlock()`; the reply says whether it threw (`IllegalMonitorStateException` when
    /// this thread does not hold the lock).
    pub async fn unlock(&self, kind: Kind, name: &str) -> Reply {
        self.call(&[kind.word(), "unlock", name]).await
    }

    /// `forceUnlock()`: whether a lock was deleted.
    pub async fn force_unlock(&self, kind: Kind, name: &str) -> bool {
        self.call(&[kind.word(), "forceunlock", name]).await.bool()
    }

    /// `getHoldCount()`: this thread's count.
    pub async fn hold_count(&self, kind: Kind, name: &str) -> i64 {
        self.call(&[kind.word(), "holdcount", name]).await.int()
    }

    /// `isHeldByCurrentThread()`.
    pub async fn is_held(&self, kind: Kind, name: &str) -> bool {
        self.call(&[kind.word(), "held", name]).await.bool()
    }

    /// `isLocked()`.
    pub async fn is_locked(&self, kind: Kind, name: &str) -> bool {
        self.call(&[kind.word(), "locked", name]).await.bool()
    }

    /// `remainTimeToLive()` in milliseconds (-2 no lock, -1 no expiry).
    pub async fn ttl(&self, kind: Kind, name: &str) -> i64 {
        self.call(&[kind.word(), "ttl", name]).await.int()
    }

    /// `getToken()` of a fenced lock: the last token drawn, `None` before the first.
    pub async fn token(&self, name: &str) -> Option<i64> {
        self.call(&[Kind::Fenced.word(), "token", name])
            .await
            .opt_int()
    }
}
