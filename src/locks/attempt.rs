//! One try at a lock: the acquire script, run so that nothing it takes is left behind
//! whatever happens to the caller (a dropped future, a lost reply, no replica), and its
//! hold registered. Single locks and every node of a group take locks through it.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::client_core::Core;
use crate::error::{may_have_run, Error, Result};
use crate::holds::{Applied, Hold, HoldId, Lease, Renewal, Terms};
use crate::locks::guard::LockGuard;
use crate::locks::release::{Release, Released};
use crate::locks::wait::Tried;
use crate::protocol::conn::Conn;
use crate::protocol::names::LockNames;
use crate::protocol::scripts::{AcquireCall, AcquireReply};
use crate::transport::explain;
use crate::util::detach::FinishOnDrop;
use crate::util::validate;

/// What an acquire asks for: its lease, and how long the hold may last at most, counted
/// from the acquire that takes the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Request {
    pub(crate) lease: Lease,
    pub(crate) max_hold: Option<Duration>,
}

impl Request {
    /// A fixed lease in ms (`None`: `core`'s watchdog lease) and a cap on the hold, checked.
    pub(crate) fn new(
        core: &Core,
        fixed_lease_ms: Option<u64>,
        max_hold: Option<Duration>,
    ) -> Result<Request> {
        if let Some(cap) = max_hold {
            validate::lease_millis("max_hold", cap)?;
        }
        let lease =
            fixed_lease_ms.map_or_else(|| Lease::Watchdog(core.watchdog.lease_ms()), Lease::Fixed);
        Ok(Request { lease, max_hold })
    }

    /// The terms of an acquire sent at `started`.
    fn terms(self, started: Instant) -> Terms {
        Terms {
            lease: self.lease,
            max_until: self.max_hold.and_then(|hold| started.checked_add(hold)),
        }
    }
}

/// One run of the acquire script; for a fair lock, `join_queue` also queues the caller
/// (or refreshes its place) when the lock is not taken.
///
/// With replica sync on, a lock taken counts only once a replica has it: otherwise it is
/// taken back and the attempt fails with [`Error::NotReplicated`].
///
/// # Cancel safety
/// The script call finishes even if this future is dropped; a lock it took for a caller who
/// left is released again at once, and a place it took in the queue is left.
pub(crate) async fn attempt(
    core: &Arc<Core>,
    names: &Arc<LockNames>,
    owner: &Arc<str>,
    request: Request,
    join_queue: bool,
) -> Result<Tried<LockGuard>> {
    // Refused once the client shuts down; counted meanwhile (for a group's node, whose
    // client may not be the one whose call waits), so that the shutdown waits for it.
    let _admitted = core.admit()?;
    // At the kind's first use: may the user run every command its scripts run?
    core.commands.ensure(&core.connections, names).await?;
    let id = core.holds.id(&names.key, owner);
    // A release of this owner's hold still on its way goes first; then, until this
    // attempt is settled, a release of the owner's leftover counts keeps off the lock: the
    // count this attempt adds may be in Redis before its hold is here (see
    // `Holds::attempt_started`).
    let _in_flight = core.holds.attempt_started(&id).await;
    // A write that waits for replicas blocks its connection meanwhile: with replica sync
    // it goes out on a pooled connection of its own, kept checked out until its WAIT is
    // answered.
    let (mut conn, shared, checkout) = match core.replica_sync {
        None => {
            let shared = core.connections.shared().await?;
            (shared.conn.clone(), Some(shared), None)
        }
        Some(_) => {
            let pooled = core.connections.pooled().await?;
            (pooled.conn.clone(), None, Some(pooled))
        }
    };
    let started = Instant::now();
    let terms = core.holds.terms_for(&id, request.terms(started));
    // Read before the call goes out: if Redis then answers that the owner's field is new,
    // this hold's count had left Redis by the time the call ran.
    let prior = core.holds.live(&id);
    let sent = Sent {
        core: core.clone(),
        names: names.clone(),
        id,
        prior,
        // An undo must follow the call on the pooled connection: on the shared one it
        // could overtake an acquire that Redis has not run yet.
        pinned: checkout.as_ref().map(|pooled| pooled.conn.clone()),
        applied: Applied::within(terms.lease.millis(), terms.max_until, started),
        started,
        join_queue,
    };
    // The script call, with replica sync's WAIT when it took the lock: its reply, and the
    // replication failure if no replica has the lock.
    let call = {
        let (names, owner, sync) = (names.clone(), owner.clone(), core.replica_sync.clone());
        let (lease_ms, place) = (sent.applied.ms, core.heartbeat.place());
        let batcher = core.acquires.clone();
        async move {
            let _checkout = checkout;
            let call = AcquireCall {
                names: &names,
                lease_ms,
                owner: &owner,
                join_queue,
                place,
                // With replica sync, each acquire has a connection of its own to WAIT on.
                batcher: sync.is_none().then_some(&batcher),
            };
            let reply = call.run(conn.clone()).await?;
            let unreplicated = match (&reply, sync) {
                (AcquireReply::Acquired { .. }, Some(sync)) => {
                    // On a cluster, the WAIT goes to the master that took the write.
                    let slot = conn
                        .is_cluster()
                        .then(|| crate::protocol::key_slot(names.key.as_bytes()));
                    sync.wait(&mut conn, slot).await.err()
                }
                _ => None,
            };
            Ok((reply, unreplicated))
        }
    };
    let orphaned = sent.clone();
    let outcome = FinishOnDrop::new(call, move |outcome| orphaned.abandoned(&outcome))
        .on(core.background())
        .await;
    if let Some(shared) = &shared {
        core.connections.report(shared, &outcome);
    }
    match sent.settle(terms, outcome).await {
        // Taken while its client began to shut down (a group's node may belong to another
        // client than the one whose call waits): given back at once, by the guard's drop,
        // which the shutdown waits for.
        Ok(Tried::Acquired(guard)) if core.connections.lifecycle.is_stopping() => {
            drop(guard);
            Err(Error::ShutDown)
        }
        tried => tried,
    }
}

/// One acquire as sent: what its outcome is settled with, or undone with.
#[derive(Clone)]
struct Sent {
    core: Arc<Core>,
    names: Arc<LockNames>,
    /// Of the lock and the owner the acquire was for.
    id: HoldId,
    /// The owner's live hold when the call was sent, if any.
    prior: Option<Arc<Hold>>,
    /// The connection it went out on, if not the shared one.
    pinned: Option<Conn>,
    applied: Applied,
    started: Instant,
    join_queue: bool,
}

impl Sent {
    /// The caller left before the outcome: undo what the attempt took, or may have taken.
    fn abandoned(self, outcome: &redis::RedisResult<(AcquireReply, Option<Error>)>) {
        let (took_lock, may_be_queued) = match outcome {
            Ok((AcquireReply::Acquired { new_hold, .. }, _)) => {
                self.tell_prior_lost(*new_hold);
                (true, false)
            }
            Ok((AcquireReply::RetryWithin(_), _)) => (false, self.join_queue),
            Ok((AcquireReply::NotALock, _)) => (false, false),
            Err(e) => (
                may_have_run(e) && !self.core.holds.is_held(&self.id),
                self.join_queue && may_have_run(e),
            ),
        };
        if may_be_queued {
            // After the attempt, so that the place it took is the one left.
            let owner = self.id.owner.clone();
            crate::locks::fair::leave_in_background(self.core.clone(), self.names.clone(), owner);
        }
        if took_lock {
            // In the background: nobody waits for this call any more.
            let core = self.core.clone();
            core.spawn(self.undo());
        }
    }

    /// What the caller gets from the outcome.
    async fn settle(
        self,
        terms: Terms,
        outcome: redis::RedisResult<(AcquireReply, Option<Error>)>,
    ) -> Result<Tried<LockGuard>> {
        let core = self.core.clone();
        match outcome {
            Ok((AcquireReply::Acquired { new_hold, .. }, Some(unreplicated))) => {
                self.tell_prior_lost(new_hold);
                // The master has it and no replica does: a failover would forget it while
                // we counted on it. Taken back, awaited so that it reaches Redis before a
                // retry.
                FinishOnDrop::new(self.undo(), |()| {})
                    .on(core.background())
                    .await;
                Err(unreplicated)
            }
            Ok((AcquireReply::Acquired { token, new_hold }, None)) => {
                let renewal = match self.names.kind.side {
                    None => Renewal::Key,
                    Some(_) => Renewal::ReadWrite {
                        read_timeouts: self.names.read_timeouts(&self.id.owner),
                    },
                };
                let replaces = self.prior.as_ref().filter(|_| new_hold);
                let hold = core.holds.add(
                    &self.id,
                    renewal,
                    terms,
                    self.started,
                    self.applied,
                    replaces,
                    &self.names.metrics,
                );
                if hold.is_watchdog() {
                    core.watchdog.ensure_running();
                }
                // On a cluster it also watches for failovers, for every hold.
                if !hold.is_watchdog() || core.connections.is_cluster() {
                    core.lease_check.ensure_running();
                }
                tracing::debug!(lock = %self.names.key, owner = %self.id.owner, "acquired");
                Ok(Tried::Acquired(LockGuard::new(
                    core, self.names, hold, token,
                )))
            }
            Ok((AcquireReply::RetryWithin(wait_ms), _)) => Ok(Tried::Busy(
                u64::try_from(wait_ms).ok().map(Duration::from_millis),
            )),
            Ok((AcquireReply::NotALock, _)) => {
                Err(explain::not_a_lock(&core.connections, self.names.key.to_string()).await)
            }
            Err(e) => {
                // The script may still run (a timed-out command is not withdrawn). If this
                // owner held nothing here, any hold it finds was taken by this very attempt:
                // undo it. A re-entry cannot be undone blindly, since it may not have run;
                // at worst its extra count keeps the lock until the lease runs out after the
                // last unlock.
                if may_have_run(&e) && !core.holds.is_held(&self.id) {
                    // No other hold of this owner to keep: take the count back, and leave
                    // the TTL alone should another call of the owner hold it meanwhile.
                    let undo = Release::new(core.clone(), self.names.clone(), &self.id, 0)
                        .pinned_to(self.pinned);
                    // Awaited, so that it reaches Redis before any retry of the acquire;
                    // finished in the background if the caller leaves meanwhile.
                    FinishOnDrop::new(undo.run_once(), |()| {})
                        .on(core.background())
                        .await;
                }
                let error = explain::explain(&core.connections, "acquiring", &self.names, e.into());
                Err(error.await)
            }
        }
    }

    /// An acquire that made the owner's field anew proves the hold the owner had when it
    /// was sent lost (see [`Holds::add`](crate::holds::Holds::add)); for an acquire that is
    /// undone rather than registered.
    fn tell_prior_lost(&self, new_hold: bool) {
        if let (true, Some(prior)) = (new_hold, &self.prior) {
            self.core.holds.replaced(prior);
        }
    }

    /// Undoes this acquire, sent at `started` and applying `applied`, that took the lock for
    /// nobody: its caller left, or no replica has it.
    ///
    /// If the owner holds the lock through another guard, the undone call was a re-entry and
    /// reset the key's TTL to its own lease, which may be shorter than the live hold's: the
    /// hold's validity assumes the shorter one until the undo, which re-applies the hold's own
    /// lease, is confirmed. Otherwise the undo takes the count back and leaves the TTL alone.
    ///
    /// With replica sync on, the restored lease is not waited for, so it does not count: the
    /// hold's validity stays where the undone call left it until a renewal a replica
    /// acknowledged. `pinned` is the connection the undone call went out on, if not the shared
    /// one.
    fn undo(self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let Sent {
            core,
            names,
            id,
            applied: abandoned,
            started,
            pinned,
            ..
        } = self;
        let live = core.holds.live(&id);
        let undo_started = Instant::now();
        let restore = live.as_ref().map(|hold| {
            hold.cap_validity(started, abandoned);
            hold.lease_at(undo_started)
        });
        let lease_ms = restore.map_or(0, |applied| applied.ms);
        let counts = core.replica_sync.is_none();
        let releasing = core.holds.release_started(&id);
        async move {
            let _releasing = releasing;
            let key = names.key.clone();
            let release = Release::new(core, names, &id, lease_ms).pinned_to(pinned);
            match release.run().await {
                Ok(Released::StillHeld) => {
                    if let (Some(hold), Some(applied), true) = (live, restore, counts) {
                        hold.lease_applied(undo_started, applied);
                    }
                }
                Ok(outcome) => tracing::debug!(lock = %key, ?outcome, "acquire undone"),
                Err(e) => {
                    tracing::warn!(lock = %key, error = %e, "could not undo an acquire; it expires with its lease")
                }
            }
        }
    }
}
