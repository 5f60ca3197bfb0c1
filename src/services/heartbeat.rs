//! [`Heartbeat`]: the background task that keeps every queued fair-lock waiter of one
//! client in its place (the places themselves are [`QueuePlace`](crate::locks::fair)s,
//! joined by the acquire loop and left the moment a waiter gives up).
//!
//! A queued waiter has a deadline on the Redis server's clock. The heartbeat pushes it
//! forward every quarter of the client's `fair_waiter_timeout`, three quarters of it ahead,
//! so a live waiter never loses its place to a missed beat or two, and one whose process
//! died is dropped within the timeout: by the heartbeat of any other waiter in the queue,
//! or by the next script call on the lock. A waiter whose process died with its connection
//! closed is passed over within 100 ms: see `notify_head` in `fair_common.lua`. A waiter that
//! heads the queue of a free lock is not refreshed: it was told to take the lock, and one
//! that does not (a future nobody polls) is dropped like a dead one.
//!
//! A place belongs to an owner (a task), not to one call: two waits of one task on one lock
//! share it, and it is left when the last of them gives up.

use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;

use crate::config::settings::Settings;
use crate::protocol::kinds::fair::{self, Place, PlaceTerms};
use crate::protocol::names::LockNames;
use crate::protocol::slot::batches;
use crate::services::periodic::{Periodic, Rounds};
use crate::transport::connections::Connections;
use crate::transport::pubsub::UnlockListener;

type PlaceKey = (Arc<str>, Arc<str>);

/// Keeps every queued waiter of one client in its place: refresh rounds, run by a
/// [`Periodic`] task.
pub(crate) type Heartbeat = Periodic<Refreshes>;

/// The places one client keeps, and how.
pub(crate) struct Refreshes {
    /// (lock key, owner) → the lock's names and how many waits of that owner want it: one,
    /// unless one task awaits two acquires of the same lock at once.
    places: DashMap<PlaceKey, (Arc<LockNames>, usize)>,
    connections: Arc<Connections>,
    listener: UnlockListener,
    place: PlaceTerms,
    interval: Duration,
    batch_size: usize,
}

impl Heartbeat {
    /// The heartbeat of one client's queued waiters, on `runtime`. `waiter_timeout`: how
    /// long a dead waiter may hold its place at most (at the head of the queue;
    /// `redisson_wait` more for each waiter ahead of it).
    pub(crate) fn keeping_places(
        connections: &Arc<Connections>,
        listener: &UnlockListener,
        settings: &Settings,
        runtime: &tokio::runtime::Handle,
    ) -> Self {
        let waiter_timeout = settings.fair_waiter_timeout;
        let timeout_ms = crate::util::time::millis(waiter_timeout);
        let refreshes = Refreshes {
            places: DashMap::new(),
            connections: connections.clone(),
            listener: listener.clone(),
            place: PlaceTerms {
                keep_ms: timeout_ms / 4 * 3,
                per_waiter_ahead_ms: crate::util::time::millis(settings.redisson_fair_lock_wait),
            },
            interval: waiter_timeout / 4,
            batch_size: settings.watchdog_batch_size,
        };
        Periodic::new(refreshes, waiter_timeout / 4, None, runtime)
    }

    /// How far ahead of the server's clock a waiter's deadline is set.
    pub(crate) fn place(&self) -> PlaceTerms {
        self.rounds().place
    }

    pub(crate) fn register(&self, names: &Arc<LockNames>, owner: &Arc<str>) {
        self.rounds()
            .places
            .entry((names.key.clone(), owner.clone()))
            .or_insert_with(|| (names.clone(), 0))
            .1 += 1;
        self.ensure_running();
    }

    /// Drops one want of the place; true when it was the last.
    pub(crate) fn deregister(&self, names: &LockNames, owner: &Arc<str>) -> bool {
        self.rounds()
            .places
            .remove_if_mut(&(names.key.clone(), owner.clone()), |_, (_, wants)| {
                *wants -= 1;
                *wants == 0
            })
            .is_some()
    }

    pub(crate) fn is_registered(&self, names: &LockNames, owner: &Arc<str>) -> bool {
        self.rounds()
            .places
            .contains_key(&(names.key.clone(), owner.clone()))
    }

    /// How many (lock, owner) places this client keeps (for tests and diagnostics).
    pub(crate) fn len(&self) -> usize {
        self.rounds().places.len()
    }
}

impl Rounds for Refreshes {
    fn has_work(&self) -> bool {
        !self.places.is_empty()
    }

    /// Refreshes every place, a batch per call.
    async fn round(&self, _woken: bool) -> Duration {
        let places: Vec<(Arc<LockNames>, Arc<str>)> = self
            .places
            .iter()
            .map(|entry| (entry.value().0.clone(), entry.key().1.clone()))
            .collect();
        // On a cluster, one call per hash slot: a script call may name one slot's keys only.
        let per_slot = self.connections.is_cluster();
        for batch in batches(places, per_slot, self.batch_size, |(names, _)| {
            names.key.as_bytes()
        }) {
            let entries = batch.iter().map(|(names, owner)| (&**names, &**owner));
            let refresh = |mut conn| async move {
                fair::refresh_places(&mut conn, self.place, entries).await
            };
            match self.connections.once(refresh).await {
                Ok(found) => {
                    for ((names, owner), place) in batch.iter().zip(found) {
                        // Its turn came and it may not have heard (its pub/sub connection
                        // is reconnecting), or it was dropped from the queue (an outage
                        // outlived its deadline) or just took the lock: let it look, and
                        // take the lock or queue again.
                        if place != Place::Kept {
                            self.listener.wake_waiters(&names.wait_channel(owner));
                        }
                    }
                }
                Err(e) if e.is_connection_error() => {
                    self.connections.unreachable("fair-queue heartbeat", &e);
                }
                Err(e) => {
                    tracing::warn!(error = %e, waiters = batch.len(), "queue heartbeat refused")
                }
            }
        }
        self.interval
    }
}
