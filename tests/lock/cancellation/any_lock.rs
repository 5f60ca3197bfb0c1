//! A lock of any kind of the matrix behind one type, and its guard.

use redis_rlock::{Client, FairLock, FencedLock, GroupGuard, LockGuard, MultiLock, RLock, RedLock};

use super::axes::{Entry, Kind};
use super::{LEASE, NODE_TIMEOUT, WAIT};

/// A lock of any kind behind one type.
#[derive(Clone)]
pub(super) enum AnyLock {
    R(RLock),
    Fair(FairLock),
    Fenced(FencedLock),
    Red(RedLock),
    Multi(MultiLock),
}

/// The guard of any kind of lock.
pub(super) enum Held {
    One(LockGuard),
    Group(GroupGuard),
}

impl From<LockGuard> for Held {
    fn from(guard: LockGuard) -> Self {
        Held::One(guard)
    }
}

impl From<GroupGuard> for Held {
    fn from(guard: GroupGuard) -> Self {
        Held::Group(guard)
    }
}

impl Held {
    /// Releases the hold, whatever its kind.
    pub(super) async fn unlock(self) -> redis_rlock::Result<()> {
        match self {
            Held::One(guard) => guard.unlock().await,
            Held::Group(guard) => guard.unlock().await,
        }
    }
}

/// `$body` with `$lock` bound to the lock inside any [`AnyLock`].
macro_rules! each {
    ($any:expr, $lock:ident => $body:expr) => {
        match $any {
            AnyLock::R($lock) => $body,
            AnyLock::Fair($lock) => $body,
            AnyLock::Fenced($lock) => $body,
            AnyLock::Red($lock) => $body,
            AnyLock::Multi($lock) => $body,
        }
    };
}

impl AnyLock {
    /// The lock `name` of `kind`, on one client per master.
    pub(super) fn new(kind: Kind, clients: &[Client], name: &str) -> AnyLock {
        match kind {
            Kind::RLock => AnyLock::R(clients[0].lock(name)),
            Kind::FairLock => AnyLock::Fair(clients[0].fair_lock(name)),
            Kind::FencedLock => AnyLock::Fenced(clients[0].fenced_lock(name)),
            Kind::RedLock => AnyLock::Red(
                RedLock::new(clients.iter().map(|c| c.lock(name)).collect())
                    .with_node_timeout(NODE_TIMEOUT),
            ),
            Kind::MultiLock => AnyLock::Multi(
                MultiLock::new(clients.iter().map(|c| c.lock(name)).collect())
                    .with_node_timeout(NODE_TIMEOUT),
            ),
        }
    }

    /// Calls `entry`; `Some` with the guard when it took the lock.
    pub(super) async fn call(&self, entry: Entry) -> redis_rlock::Result<Option<Held>> {
        match entry {
            Entry::Lock => each!(self, l => l.lock().await.map(|g| Some(g.into()))),
            Entry::LockWithLease => {
                each!(self, l => l.lock_with_lease(LEASE).await.map(|g| Some(g.into())))
            }
            Entry::TryLock => each!(self, l => l.try_lock().await.map(|g| g.map(Held::from))),
            Entry::TryLockFor => {
                each!(self, l => l.try_lock_for(WAIT).await.map(|g| g.map(Held::from)))
            }
            Entry::TryLockWith => {
                each!(self, l => l.try_lock_with(WAIT, LEASE).await.map(|g| g.map(Held::from)))
            }
        }
    }

    /// Takes the lock at once, which must be free, and lets it go.
    pub(super) async fn take_and_release(&self, what: &str) {
        let guard = self
            .call(Entry::TryLock)
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"))
            .unwrap_or_else(|| panic!("{what}: the lock is not free"));
        guard.unlock().await.unwrap();
    }
}
