//! [`Lock`]: a distributed lock of one kind, with every method written once; [`RLock`], the
//! reentrant lock with Redisson's `RLock` layout.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use crate::client_core::Core;
use crate::error::{LostReason, Result};
use crate::locks::distributed::DistributedLock;
use crate::locks::guard::LockGuard;
use crate::locks::kind::{LockKind, Reentrant};
use crate::protocol::names::LockNames;
use crate::protocol::owner::{Identity, Owner};
use crate::protocol::scripts::{self, ForceUnlocked};
use crate::transport::explain;
use crate::util::validate;

/// A reentrant distributed lock, shared with every process (Rust or Java/Redisson) that
/// names the same key.
///
/// The lock is a Redis hash at the key: field `<client-uuid>:<task-id>`, value the number of
/// holds. The task that holds it may take it again (each call returns a guard, and the lock
/// frees when the last is released); any other task, here or elsewhere, waits.
///
/// **The owner is the task, not the future.** Futures that one task polls concurrently
/// (`join!`, `select!`, `FuturesUnordered`, `buffer_unordered`, stream combinators) are one
/// owner: each re-enters the others' hold, and their critical sections overlap, where a
/// `tokio::sync::Mutex` would let one in. Give each future its own owner with
/// [`with_owner`](Lock::with_owner) ([`Client::new_owner`](crate::Client::new_owner)), or
/// use a handle that never re-enters, [`non_reentrant`](Lock::non_reentrant).
///
/// Waiting never polls: waiters subscribe to the lock's unlock channel and are woken by
/// the release, or re-check when the holder's lease would have run out. A release wakes
/// one waiter, whichever gets there first; for first come, first served, use a
/// [`FairLock`](crate::FairLock).
///
/// Cheap to clone; made by [`Client::lock`](crate::Client::lock).
///
/// ```no_run
/// # async fn demo(client: redis_rlock::Client) -> redis_rlock::Result<()> {
/// let lock = client.lock("order:1001");
/// let outer = lock.lock().await?;
/// let inner = lock.lock().await?; // same task: re-entry, no wait
/// assert_eq!(lock.hold_count().await?, 2);
/// inner.unlock().await?;
/// outer.unlock().await?;
/// assert!(!lock.is_locked().await?);
/// # Ok(()) }
/// ```
pub type RLock = Lock<Reentrant>;

/// What [`Lock::force_unlock_if_held_by`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ForceUnlockOutcome {
    /// The lock was held by exactly the holders given, and is deleted; waiters are told as
    /// by [`Lock::force_unlock`].
    Deleted,
    /// Nobody held it, as the caller saw (no holders given); for a fair lock, its queue was
    /// purged and its head told.
    NotHeld,
    /// Nothing was changed: the lock is not held as the caller saw it. What it holds now:
    /// a read-write lock's `mode` (`None` for other kinds, or when free), and the owner
    /// fields of its holders (empty when free).
    HoldersChanged {
        /// `read` or `write` for a read-write lock; `None` otherwise, or when free.
        mode: Option<String>,
        /// The owner fields found, as the hash stores them.
        holders: Vec<String>,
    },
}

/// A distributed lock of kind `K`; use it as [`RLock`], [`FairLock`](crate::FairLock),
/// [`FencedLock`](crate::FencedLock), or a [`ReadWriteLock`](crate::ReadWriteLock)'s
/// [`ReadLock`](crate::ReadLock) and [`WriteLock`](crate::WriteLock).
///
/// Every kind has the same methods and the same [`LockGuard`]; they differ in who gets the
/// lock when it frees. To write code for any kind, take a `Lock<K>` with `K: LockKind`, or
/// any [`DistributedLock`].
#[derive(Clone)]
pub struct Lock<K: LockKind = Reentrant> {
    pub(super) core: Arc<Core>,
    pub(super) name: Arc<str>,
    /// `None` for an invalid name, reported by the first call.
    pub(super) names: Option<Arc<LockNames>>,
    /// How long a hold taken through this handle may last at most; checked by each call.
    pub(super) max_hold: Option<Duration>,
    /// Whose name the locks are taken in.
    pub(super) identity: Identity,
    /// The class its metrics were given by [`Lock::with_class`].
    pub(super) class: Option<Arc<str>>,
    kind: PhantomData<fn() -> K>,
}

impl<K: LockKind> std::fmt::Debug for Lock<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(K::TYPE_NAME)
            .field("name", &self.name)
            .field("max_hold", &self.max_hold)
            .field("owner", &self.identity)
            .finish()
    }
}

impl<K: LockKind> Lock<K> {
    pub(crate) fn new(core: Arc<Core>, name: &str) -> Self {
        let names = validate::lock_name(name).ok().map(|()| {
            let prefix = &core.settings.key_prefix;
            let metrics = core.classes.of(K::KIND.label, name, None);
            let names = LockNames::new(K::KIND, prefix, name).with_metrics(metrics);
            Arc::new(if core.connections.is_cluster() {
                names.on_cluster(core.channel_kind)
            } else {
                names
            })
        });
        Lock {
            core,
            name: name.into(),
            names,
            max_hold: None,
            identity: Identity::Task,
            class: None,
            kind: PhantomData,
        }
    }

    /// This handle, with its metrics in the class `class` instead of the one the client's
    /// rule gives its name ([`ClientBuilder::lock_class_by_prefix`](crate::ClientBuilder::lock_class_by_prefix)):
    /// the `class` label of `rlock_acquires_total`, `rlock_acquire_wait_seconds`,
    /// `rlock_hold_seconds`, `rlock_releases_total`, `rlock_locks_lost_total` and the
    /// held and waiting gauges, with the `metrics` feature. It counts against the client's
    /// [`max_lock_classes`](crate::ClientBuilder::max_lock_classes) as any class does.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_rlock::Client) -> redis_rlock::Result<()> {
    /// let nightly = client.lock("report:2026-11-28").with_class("nightly-report");
    /// let guard = nightly.lock().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_class(mut self, class: &str) -> Self {
        let metrics = self.core.classes.of(K::KIND.label, &self.name, Some(class));
        let names = self
            .names
            .map(|names| LockNames::clone(&names).with_metrics(metrics));
        self.names = names.map(Arc::new);
        self.class = Some(class.into());
        self
    }

    /// The metrics a group of `kind` made of this handle reports to: its class.
    pub(crate) fn metrics_as(&self, kind: &'static str) -> crate::util::lock_metrics::LockMetrics {
        self.core
            .classes
            .of(kind, &self.name, self.class.as_deref())
    }

    /// This handle, taking its locks in `owner`'s name instead of the calling task's: calls
    /// through it re-enter `owner`'s holds only, from whichever task they come, and every
    /// other owner waits, in the same task too. Guards stay movable between tasks.
    ///
    /// For critical sections that one task runs concurrently (`join!`, `select!`,
    /// `FuturesUnordered`, `buffer_unordered`): by default they are all the task's, so
    /// they re-enter one another's holds and overlap. Give each its own [`Owner`]
    /// ([`Client::new_owner`](crate::Client::new_owner)), or use
    /// [`non_reentrant`](Lock::non_reentrant).
    ///
    /// [`hold_count`](Lock::hold_count) and
    /// [`is_held_by_current_task`](Lock::is_held_by_current_task) answer for `owner`.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_rlock::Client) -> redis_rlock::Result<()> {
    /// let (a, b) = (client.new_owner(), client.new_owner());
    /// let (first, second) = tokio::join!(
    ///     async { client.lock("ledger").with_owner(a).lock().await },
    ///     // Same task, another owner: waits until `first` is released.
    ///     async { client.lock("ledger").with_owner(b).try_lock().await },
    /// );
    /// assert!(second?.is_none());
    /// first?.unlock().await?;
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn with_owner(mut self, owner: Owner) -> Self {
        self.identity = Identity::Owner(owner);
        self
    }

    /// This handle, never re-entering: each acquire through it is an owner of its own (a
    /// fresh [`Owner`]), so a second acquire waits for the first to be released, in the
    /// same task too, and a [`try_lock`](Lock::try_lock) says busy: the semantics of
    /// `tokio::sync::Mutex`. A task that takes such a lock twice without releasing it
    /// waits for itself, until the first lease is lost or released.
    ///
    /// Each guard is then its own holder: [`hold_count`](Lock::hold_count) and
    /// [`is_held_by_current_task`](Lock::is_held_by_current_task) answer 0 and `false`
    /// through this handle (they ask for a fresh owner); use
    /// [`is_locked`](Lock::is_locked) or the guard.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_rlock::Client) -> redis_rlock::Result<()> {
    /// let lock = client.lock("ledger").non_reentrant();
    /// let guard = lock.lock().await?;
    /// assert!(lock.try_lock().await?.is_none(), "no re-entry, even in this task");
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn non_reentrant(mut self) -> Self {
        self.identity = Identity::EachAcquire;
        self
    }

    /// This handle, with a cap on how long any hold taken through it may last: counted from
    /// the acquire that takes the lock, the watchdog renews it until the cap and no
    /// further, and every lease applied to the key (a fixed lease, a re-entry's, an
    /// unlock's) is cut short so as to end by the cap. The lock then frees itself (give or
    /// take the time a request takes to reach Redis), and the guard's
    /// [`lost`](LockGuard::lost) resolves with [`LostReason::MaxHoldReached`] just before,
    /// by its [`valid_until`](LockGuard::valid_until).
    ///
    /// For work that must never keep a lock forever, even when the process is alive and
    /// its watchdog healthy but the work itself is stuck. A re-entry keeps the earlier of
    /// its own cap and the one the hold already has: a nested call cannot lift the cap
    /// of the outer one.
    ///
    /// The cap is checked by each call: under 10 ms or over ten years is
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument), with nothing sent.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_rlock::Client) -> redis_rlock::Result<()> {
    /// use std::time::Duration;
    /// let lock = client.lock("nightly-report").with_max_hold(Duration::from_secs(3600));
    /// let guard = lock.lock().await?;
    /// tokio::select! {
    ///     _ = build_the_report() => guard.unlock().await?,
    ///     reason = guard.lost() => eprintln!("gave up the report: {reason}"),
    /// }
    /// # Ok(()) }
    /// # async fn build_the_report() {}
    /// ```
    #[must_use]
    pub fn with_max_hold(mut self, cap: Duration) -> Self {
        self.max_hold = Some(cap);
        self
    }

    /// The cap set by [`with_max_hold`](Lock::with_max_hold), if any.
    pub fn max_hold(&self) -> Option<Duration> {
        self.max_hold
    }

    /// The lock's name, as given to [`Client::lock`](crate::Client::lock) or the other
    /// factory methods (without the key prefix).
    pub fn name(&self) -> &str {
        &self.name
    }

    fn names(&self) -> Result<&Arc<LockNames>> {
        match &self.names {
            Some(names) => match names.split() {
                None => Ok(names),
                Some(split) => Err(split.error(&names.key)),
            },
            None => Err(validate::lock_name(&self.name)
                .expect_err("only a rejected name leaves the names unset")),
        }
    }

    /// The lock's names, once the connected user is known to be allowed every command of
    /// this kind (checked at the kind's first use).
    async fn checked_names(&self) -> Result<&Arc<LockNames>> {
        let names = self.names()?;
        self.core
            .commands
            .ensure(&self.core.connections, names)
            .await?;
        Ok(names)
    }

    /// The client and names a call on this lock uses; an invalid name is the error.
    pub(crate) fn parts(&self) -> Result<(&Arc<Core>, &Arc<LockNames>)> {
        Ok((&self.core, self.names()?))
    }

    /// Takes the lock, waiting as long as it takes. The watchdog keeps it alive (lease:
    /// the client's watchdog timeout, 30 s by default, renewed every third of it) until the
    /// guard is released or dropped.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an empty name; a connection error when Redis cannot
    /// be reached after the configured retries; [`Error::Timeout`](crate::Error::Timeout) when the unlock
    /// subscription cannot be made; [`Error::NotALock`](crate::Error::NotALock) when the
    /// key holds something other than a lock of this kind (nothing is written); for a
    /// [`WriteLock`](crate::WriteLock), [`Error::UpgradeRefused`](crate::Error::UpgradeRefused)
    /// when the calling task holds the read lock (nothing is sent).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call leaves no subscription behind, a lock it took in its
    /// last moment is released at once, and a fair lock's waiter leaves the queue at once.
    pub async fn lock(&self) -> Result<LockGuard> {
        DistributedLock::lock(self).await
    }

    /// Takes the lock with a fixed lease, waiting as long as it takes. No watchdog: the lock
    /// frees itself when the lease runs out, and the guard reports it lost.
    ///
    /// A re-entry into a lock the calling task holds under the watchdog stays under the
    /// watchdog: a nested call cannot shorten what the outer one was promised.
    ///
    /// # Errors
    /// As [`lock`](Lock::lock); also [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a lease under 10 ms or
    /// over ten years.
    ///
    /// # Cancel safety
    /// As [`lock`](Lock::lock).
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard> {
        DistributedLock::lock_with_lease(self, lease).await
    }

    /// One attempt, no waiting: `Ok(None)` when someone else holds the lock (or, for a fair
    /// lock, when others are queued for it: a `try_lock` never jumps the queue). Watchdog
    /// lease.
    ///
    /// # Errors
    /// As [`lock`](Lock::lock).
    ///
    /// # Cancel safety
    /// As [`lock`](Lock::lock).
    pub async fn try_lock(&self) -> Result<Option<LockGuard>> {
        DistributedLock::try_lock(self).await
    }

    /// Waits up to `wait` for the lock: `Ok(None)` if it stayed held that long. Watchdog
    /// lease. A `wait` too large to add to the clock waits without bound. A fair lock's
    /// waiter that gives up has left the queue, and the waiter behind it was told, by the
    /// time this returns (if Redis fails just then, the leave is retried in the background,
    /// and the place expires with its deadline at the latest).
    ///
    /// The wait is a budget for outages too: failures to reach Redis (a refused or reset
    /// connection, a timeout, a server loading or failing over) are retried, with a backoff
    /// that doubles up to a second, until `wait` is spent, so a Redis restarted within the
    /// wait costs time, not an error. [`lock`](Lock::lock), which has no budget, fails after
    /// the client's `retry_attempts` instead.
    ///
    /// # Errors
    /// As [`lock`](Lock::lock), except that a connection error comes only once `wait` is
    /// spent (the last one seen); refused credentials, permissions and input at once.
    ///
    /// # Cancel safety
    /// As [`lock`](Lock::lock).
    pub async fn try_lock_for(&self, wait: Duration) -> Result<Option<LockGuard>> {
        DistributedLock::try_lock_for(self, wait).await
    }

    /// Waits up to `wait` for the lock and takes it with a fixed `lease` (no watchdog),
    /// riding out failures to reach Redis within `wait` as
    /// [`try_lock_for`](Lock::try_lock_for) does.
    ///
    /// # Errors
    /// As [`lock_with_lease`](Lock::lock_with_lease), with connection errors only once
    /// `wait` is spent.
    ///
    /// # Cancel safety
    /// As [`lock`](Lock::lock).
    pub async fn try_lock_with(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<LockGuard>> {
        DistributedLock::try_lock_with(self, wait, lease).await
    }

    /// Deletes the lock whoever holds it and wakes one waiter (for a fair lock, the head of
    /// the queue; the queue itself stays; for a read-write lock's side, only a lock held in
    /// that side's mode, see [`ReadWriteLock`](crate::ReadWriteLock)). Returns whether it
    /// was deleted.
    /// Guards of this client on the lock report it lost at once ([`LostReason::Released`]);
    /// other clients' guards when their watchdog next renews.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an empty name; a connection error.
    ///
    /// # Cancel safety
    /// Not cancel safe: if dropped, the lock may or may not have been deleted.
    #[tracing::instrument(level = "debug", skip(self), fields(lock = %self.name))]
    pub async fn force_unlock(&self) -> Result<bool> {
        let deleted = self.force_unlock_seen(None).await?;
        Ok(deleted != ForceUnlocked::Nothing)
    }

    /// [`force_unlock`](Lock::force_unlock), but only if the lock is held by exactly the
    /// `holders` the caller saw, checked in the same script that deletes it: an operator
    /// who was shown holder X never frees holder Y, who took the lock after X released
    /// it. `holders` are owner fields as the lock hash stores them
    /// (`<client-uuid>:<task-id>`; a read-write lock's writer with `:write` after it);
    /// their counts do not matter (a holder that re-entered meanwhile is still the one
    /// seen). For a read-write lock's side, the lock must also still be held in that
    /// side's mode. Empty `holders` ask for a lock that is still free: for a fair lock,
    /// the script then purges the queue and tells its head, as `force_unlock` does.
    ///
    /// When the holders differ, nothing is changed and the answer says what the lock
    /// holds now. This is what `rlock unlock` runs.
    ///
    /// # Errors
    /// As [`force_unlock`](Lock::force_unlock); [`Error::NotALock`](crate::Error::NotALock)
    /// when the key holds other data.
    ///
    /// # Cancel safety
    /// Not cancel safe: if dropped, the lock may or may not have been deleted.
    #[tracing::instrument(level = "debug", skip(self, holders), fields(lock = %self.name))]
    pub async fn force_unlock_if_held_by<S: AsRef<str>>(
        &self,
        holders: &[S],
    ) -> Result<ForceUnlockOutcome> {
        let seen: Vec<String> = holders.iter().map(|h| h.as_ref().to_string()).collect();
        Ok(match self.force_unlock_seen(Some(&seen)).await? {
            ForceUnlocked::Nothing => ForceUnlockOutcome::NotHeld,
            ForceUnlocked::Deleted | ForceUnlocked::DeletedHeadUnheard => {
                ForceUnlockOutcome::Deleted
            }
            ForceUnlocked::Changed { mode, holders } => {
                ForceUnlockOutcome::HoldersChanged { mode, holders }
            }
        })
    }

    /// The force unlock, of whoever holds the lock or (`seen`) of exactly those holders.
    async fn force_unlock_seen(&self, seen: Option<&[String]>) -> Result<ForceUnlocked> {
        let names = self.checked_names().await?;
        let connections = &self.core.connections;
        let hit = self.core.holds.holds_of(&names.key);
        let deleted = connections
            .with_retries(|conn| scripts::force_unlock(conn, names, seen))
            .await;
        let deleted = explain::explained(connections, "force-unlocking", names, deleted).await?;
        if deleted == ForceUnlocked::DeletedHeadUnheard {
            crate::locks::fair::look_again_after_grace(&self.core, names);
        }
        if matches!(
            deleted,
            ForceUnlocked::Deleted | ForceUnlocked::DeletedHeadUnheard
        ) {
            for hold in hit {
                hold.mark_lost(LostReason::Released);
            }
        }
        Ok(deleted)
    }

    /// Whether anyone holds the lock (for a read-write lock's side, whether anyone holds
    /// that side: see [`ReadWriteLock`](crate::ReadWriteLock)).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an empty name;
    /// [`Error::NotALock`](crate::Error::NotALock) when the key holds other data; a
    /// connection error.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn is_locked(&self) -> Result<bool> {
        Ok(self.state().await?.locked)
    }

    /// Whether the calling task holds the lock.
    ///
    /// # Errors
    /// As [`is_locked`](Lock::is_locked).
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn is_held_by_current_task(&self) -> Result<bool> {
        Ok(self.state().await?.count > 0)
    }

    /// How many holds the calling task has on the lock (0 when it holds none).
    ///
    /// # Errors
    /// As [`is_locked`](Lock::is_locked).
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn hold_count(&self) -> Result<u32> {
        Ok(self.state().await?.count)
    }

    /// How long until the lock's lease runs out: `None` when it is not held (or, if a
    /// foreign client wrote it, has no expiry).
    ///
    /// # Errors
    /// As [`is_locked`](Lock::is_locked).
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn remaining_ttl(&self) -> Result<Option<Duration>> {
        let pttl = self.state().await?.pttl_ms;
        Ok(u64::try_from(pttl).ok().map(Duration::from_millis))
    }

    /// The lock as Redis has it, seen by the calling task; one read-only script call.
    async fn state(&self) -> Result<scripts::LockState> {
        let names = self.checked_names().await?;
        let owner = names.owner_field(&self.identity.field(&self.core.id_text));
        let connections = &self.core.connections;
        let state = connections
            .with_retries(|conn| scripts::inspect(conn, names, &owner))
            .await;
        explain::explained(connections, "reading", names, state).await
    }
}
