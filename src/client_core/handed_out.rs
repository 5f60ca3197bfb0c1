//! [`HandedOut`]: every guard a client handed out and that is not yet released, so that
//! [`Client::shutdown`](crate::Client::shutdown) can release what the guards still hold.
//!
//! Each guard has a ticket, and whoever takes its entry releases it: the guard (its
//! `unlock()`, `release()` or drop), or the shutdown. A guard whose entry the shutdown
//! took sends nothing afterwards.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use dashmap::DashMap;

use crate::holds::Hold;
use crate::protocol::names::{LockNames, SyncNames};

/// What one guard holds.
pub(crate) enum Outstanding {
    /// One hold of a lock (a re-entry is a guard of its own).
    Lock {
        names: Arc<LockNames>,
        hold: Arc<Hold>,
    },
    /// Permits of a semaphore, which have no owner.
    Permits { names: Arc<SyncNames>, permits: u64 },
    /// One permit of an expirable semaphore.
    Permit {
        names: Arc<SyncNames>,
        id: [u8; 16],
        hold: Arc<Hold>,
    },
}

/// The guards a client handed out and that are not yet released, by ticket.
#[derive(Default)]
pub(crate) struct HandedOut {
    next: AtomicU64,
    guards: DashMap<u64, Outstanding>,
}

impl HandedOut {
    /// Lists a new guard's holding; returns its ticket.
    pub(crate) fn list(&self, holding: Outstanding) -> u64 {
        let ticket = self.next.fetch_add(1, Ordering::Relaxed);
        self.guards.insert(ticket, holding);
        ticket
    }

    /// Takes the guard of `ticket` off the list, for its own release: false when the
    /// shutdown took it first (and released what it held).
    pub(crate) fn take(&self, ticket: u64) -> bool {
        self.guards.remove(&ticket).is_some()
    }

    /// Takes every guard off the list, for the shutdown to release.
    pub(crate) fn take_all(&self) -> Vec<Outstanding> {
        let tickets: Vec<u64> = self.guards.iter().map(|entry| *entry.key()).collect();
        tickets
            .into_iter()
            .filter_map(|ticket| self.guards.remove(&ticket).map(|(_, holding)| holding))
            .collect()
    }
}
