//! [`GroupGuard`]: a lock held on a quorum of nodes ([`RedLock`](crate::RedLock)) or on all
//! of a group's locks ([`MultiLock`](crate::MultiLock)).

use std::future::Future;
use std::sync::{Arc, Mutex};

use futures_util::future::select_all;
use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::Notify;
use tokio::time::Instant;

use tracing::Instrument;

use crate::error::{Error, LostReason, Result};
use crate::locks::guard::{lost_error, LockGuard};
use crate::util::detach::FinishOnDrop;
use crate::util::poison;

/// Proof that a lock group is held: one [`LockGuard`] per node (or lock) that took it.
///
/// The group is held while at least its quorum of those holds is: a majority of the nodes
/// for a [`RedLock`](crate::RedLock), every lock for a [`MultiLock`](crate::MultiLock).
/// Each hold is renewed by its own client's watchdog (or runs out with its fixed lease);
/// [`lost`](GroupGuard::lost) resolves once fewer than the quorum remain.
///
/// Release it with [`unlock`](GroupGuard::unlock); dropping it releases every hold in the
/// background.
#[must_use = "if unused the lock is released immediately"]
#[clippy::has_significant_drop]
pub struct GroupGuard {
    state: Arc<GroupState>,
}

struct GroupState {
    /// The group's first lock name, for errors and logs.
    name: String,
    owner: Arc<str>,
    quorum: usize,
    /// Nodes (or locks) in the group.
    total: usize,
    /// A fenced `RedLock`'s token, agreed by its majority.
    token: Option<u64>,
    /// `None` once the guard is released: a hold that arrives later releases itself.
    holds: Mutex<Option<Vec<LockGuard>>>,
    /// Told when a hold joins, so that `lost()` counts it.
    joined: Notify,
}

impl std::fmt::Debug for GroupGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupGuard")
            .field("name", &self.state.name)
            .field("owner", &self.state.owner)
            .field("held_on", &self.held_on())
            .field("quorum", &self.state.quorum)
            .field("total", &self.state.total)
            .finish()
    }
}

impl GroupGuard {
    pub(crate) fn new(
        name: &str,
        owner: Arc<str>,
        quorum: usize,
        total: usize,
        holds: Vec<LockGuard>,
        token: Option<u64>,
    ) -> Self {
        GroupGuard {
            state: Arc::new(GroupState {
                name: name.to_string(),
                owner,
                quorum,
                total,
                token,
                holds: Mutex::new(Some(holds)),
                joined: Notify::new(),
            }),
        }
    }

    /// A handle through which a node's late answer can join the guard.
    pub(crate) fn joiner(&self) -> Joiner {
        Joiner {
            state: Arc::downgrade(&self.state),
        }
    }

    /// The hash field held on every node: `<client-uuid>:<task-id>`, with the first
    /// lock's client id.
    pub fn owner(&self) -> &str {
        &self.state.owner
    }

    /// The fencing token of this acquire, for a [`RedLock`](crate::RedLock) of
    /// [`FencedLock`](crate::FencedLock)s (always `Some` there; `None` otherwise): strictly
    /// greater than the token of every earlier holder of the group, whichever majority of
    /// masters each held. Pass it with every write to the protected resource, which refuses
    /// a token lower than one it has seen (see
    /// [`Client::fenced_set`](crate::Client::fenced_set)).
    ///
    /// It is the greatest token the majority drew, raised on every master that holds the
    /// lock before the guard was returned; see
    /// [fencing across the masters of a RedLock](crate::locks#fencing-across-the-masters-of-a-redlock)
    /// for why that keeps tokens growing across majorities, and what it assumes.
    pub fn fencing_token(&self) -> Option<u64> {
        self.state.token
    }

    /// On how many nodes (or locks) the group is held now, lost holds left out.
    pub fn held_on(&self) -> usize {
        self.state.live_holds()
    }

    /// The instant until which the group is certainly held, on this process's monotonic
    /// clock: the quorum-th latest validity deadline of its holds (for a `MultiLock`, the
    /// earliest). Each hold's deadline is the start of its last confirmed acquire or renewal
    /// plus its lease, minus 1 % of the lease and 2 ms for clock drift, or the moment it was
    /// found lost if that came first. Once the group is lost, this is when it was.
    pub fn valid_until(&self) -> std::time::Instant {
        self.state.valid_until().into_std()
    }

    /// Whether fewer than the quorum of holds remain.
    pub fn is_lost(&self) -> bool {
        self.state.live_holds() < self.state.quorum
    }

    /// Resolves once fewer than the quorum of holds remain: [`LostReason::QuorumLost`] for a
    /// `RedLock`; for a `MultiLock`, the reason its first lost lock gave. Never resolves
    /// for a group that stays held or was released.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static {
        let state = self.state.clone();
        async move { state.lost().await }
    }

    /// Releases the group on every node at once, and returns as soon as the quorum has
    /// confirmed (every node, for a `MultiLock`): the group is free from then on, since
    /// another owner can gather its quorum on the nodes that confirmed. The other nodes'
    /// releases finish in the background. A minority of nodes that cannot be reached does not fail the unlock:
    /// each is logged with `warn!`, and its hold expires with its lease.
    ///
    /// # Errors
    /// [`Error::LockLost`] when the group was lost before this call
    /// (no other owner's lock is touched); the error of a node when fewer than the quorum
    /// confirmed the release.
    ///
    /// # Cancel safety
    /// The release runs to completion in the background if this future is dropped.
    pub async fn unlock(self) -> Result<()> {
        let state = self.state.clone();
        let span = tracing::debug_span!("unlock", lock = %state.name, nodes = state.total);
        FinishOnDrop::new(async move { state.unlock().await }.instrument(span), |_| {}).await
    }
}

impl GroupState {
    fn live_holds(&self) -> usize {
        let holds = poison::locked(&self.holds);
        let live = holds.iter().flatten().filter(|hold| !hold.is_lost());
        live.count()
    }

    fn valid_until(&self) -> Instant {
        let holds = poison::locked(&self.holds);
        // A lost hold's deadline is when it was lost at the latest, so lost holds count too:
        // once fewer than the quorum are live, this is when the group was lost.
        let mut deadlines: Vec<Instant> = holds
            .iter()
            .flatten()
            .map(|hold| Instant::from_std(hold.valid_until()))
            .collect();
        deadlines.sort_unstable_by(|a, b| b.cmp(a));
        let quorum_th = deadlines.get(self.quorum - 1).copied();
        quorum_th.unwrap_or_else(Instant::now)
    }

    async fn lost(&self) -> LostReason {
        loop {
            let joined = self.joined.notified();
            tokio::pin!(joined);
            joined.as_mut().enable();
            let holds = poison::locked(&self.holds).as_ref().map(|holds| {
                let live = holds.iter().filter(|hold| !hold.is_lost());
                let reasons = holds.iter().filter_map(LockGuard::lost_reason);
                let live: Vec<_> = live.map(|hold| Box::pin(hold.lost())).collect();
                (live, reasons.collect::<Vec<_>>())
            });
            // Released: never lost.
            let Some((live, reasons)) = holds else {
                return std::future::pending().await;
            };
            if live.len() < self.quorum {
                return self.reason(&reasons);
            }
            tokio::select! {
                _ = select_all(live) => {}
                _ = joined => {}
            }
        }
    }

    async fn unlock(&self) -> Result<()> {
        let was_lost = self.live_holds() < self.quorum;
        let expired_at = self.valid_until();
        let holds = self.take_holds();
        let mut pending: FuturesUnordered<_> = holds.into_iter().map(LockGuard::unlock).collect();
        let (mut confirmed, mut errors) = (0, Vec::new());
        let released = |confirmed| !was_lost && confirmed >= self.quorum;
        while !released(confirmed) {
            match pending.next().await {
                Some(Ok(())) => confirmed += 1,
                Some(Err(e)) => errors.push(e),
                None => break,
            }
        }
        if released(confirmed) {
            // The quorum confirmed: another owner can gather its own on those nodes. The
            // rest finish in the background (each release does, dropped or not); their
            // failures are only worth a warning.
            let name = self.name.clone();
            let late = pending.collect::<Vec<_>>();
            drop(FinishOnDrop::new(late, move |late| {
                for e in late.iter().filter_map(|outcome| outcome.as_ref().err()) {
                    warn_unconfirmed(&name, e);
                }
            }));
            for e in &errors {
                warn_unconfirmed(&self.name, e);
            }
            return Ok(());
        }
        // Every hold's client shut down, which released them: say so.
        if confirmed == 0 && !errors.is_empty() && errors.iter().all(Error::is_shut_down) {
            return Err(Error::ShutDown);
        }
        let reasons: Vec<LostReason> = errors.iter().filter_map(Error::lost_reason).collect();
        if was_lost || !reasons.is_empty() {
            let reason = self.reason(&reasons);
            return Err(lost_error(self.name.clone(), reason, expired_at));
        }
        let failed = errors.into_iter().next();
        Err(failed.expect("fewer confirmations than holds means a failure"))
    }

    /// Why the group is lost, from the reasons its lost holds gave: a `MultiLock`'s first;
    /// for a `RedLock`, the reason all of them share if they do (every hold reaching the
    /// maximum hold time, or released by its client's shutdown), else
    /// [`LostReason::QuorumLost`].
    fn reason(&self, reasons: &[LostReason]) -> LostReason {
        match reasons.first() {
            Some(&first) if self.quorum == self.total => first,
            Some(&first)
                if matches!(first, LostReason::MaxHoldReached | LostReason::ShutDown)
                    && reasons.iter().all(|&r| r == first) =>
            {
                first
            }
            _ => LostReason::QuorumLost,
        }
    }

    fn take_holds(&self) -> Vec<LockGuard> {
        poison::locked(&self.holds).take().unwrap_or_default()
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        // Each hold releases itself in the background as it drops.
        drop(self.state.take_holds());
    }
}

fn warn_unconfirmed(name: &str, e: &Error) {
    tracing::warn!(lock = %name, error = %e, "a node did not confirm the release; its hold expires with its lease");
}

/// Where a node's answer that came after the quorum goes: into the guard while it is held,
/// back to the caller, to release, otherwise.
pub(crate) struct Joiner {
    state: std::sync::Weak<GroupState>,
}

impl Joiner {
    /// Adds `hold` to the guard; returns it when the guard was released or dropped.
    #[must_use]
    pub(crate) fn join(&self, hold: LockGuard) -> Option<LockGuard> {
        let Some(state) = self.state.upgrade() else {
            return Some(hold);
        };
        match poison::locked(&state.holds).as_mut() {
            Some(holds) => holds.push(hold),
            None => return Some(hold),
        }
        state.joined.notify_waiters();
        None
    }
}

crate::locks::distributed::guard_by_inherent_methods!(GroupGuard);
