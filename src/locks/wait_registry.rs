//! The opt-in wait registry's side of a waiting call
//! ([`ClientBuilder::wait_registry`](crate::ClientBuilder::wait_registry)): a call that
//! waits for a lock records so in Redis, keeps the record fresh while it waits, removes it
//! when the wait ends, and logs one warning when the wait grows long, naming the holders
//! and the cycle of waits it is part of, if any.
//!
//! The registry is for people on call, so it never fails or delays the lock call it
//! describes: its writes run beside the wait, not before it, and their failures are only
//! logged.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use redis::RedisResult;
use tokio::time::Instant;

use crate::client_core::Core;
use crate::protocol::conn::Conn;
use crate::protocol::layout::{waiting_record, Derived};
use crate::protocol::waits::{self, Waiting};

/// Whether this process has warned that the registry's keys are not permitted.
static PERMISSION_WARNED: AtomicBool = AtomicBool::new(false);

/// How many owners the long-wait warning's walk looks at, at most: the cycle it reports
/// is the one a person can act on, and the walk must stay cheap for Redis.
const WALK_OWNERS: usize = 16;

/// A waiting call's entry in the registry: inert until the call [starts
/// waiting](Registration::waiting); removed in the background when dropped.
pub(crate) struct Registration {
    core: Arc<Core>,
    lock_key: Arc<str>,
    /// The waiting task's owner field, without a write lock's suffix: what the holders of
    /// other locks show, so that a walk can go from a holder to what it waits for.
    owner: Arc<str>,
    /// Set once the call waits.
    started: Option<Instant>,
    next_refresh: Instant,
    /// Whether this entry logged the long-wait warning (a group's call, recorded on
    /// several nodes, warns once: see [`Registration::beside`]).
    warned: bool,
    /// Whether an entry may be in Redis, so that there is something to remove.
    written: bool,
    /// Whether this entry keeps its owner's record (what the owner waits for) beside its
    /// place among the lock's waiters. An owner has one record per Redis: of a group's
    /// entries on one client, the last to start waiting keeps it (the lock the group found
    /// held most recently), or two locks would replace each other's at every refresh.
    records: bool,
}

impl Registration {
    /// The entry of `owner`'s wait for the lock at `lock_key`, when the client keeps a
    /// registry.
    /// Boxed, as the wait that keeps it is: a client without a registry carries neither in
    /// every acquire's future.
    pub(crate) fn new(
        core: &Arc<Core>,
        lock_key: &Arc<str>,
        owner: &Arc<str>,
    ) -> Option<Box<Self>> {
        core.settings.wait_registry.then(|| {
            Box::new(Registration {
                core: core.clone(),
                lock_key: lock_key.clone(),
                owner: owner.clone(),
                started: None,
                next_refresh: Instant::now(),
                warned: false,
                written: false,
                records: true,
            })
        })
    }

    /// Waits as `wait` does, with the entries of `registrations` (one lock's, or one per
    /// node of a group) written and kept fresh beside it, and one long-wait warning for
    /// them all.
    pub(crate) async fn beside<'r>(
        registrations: impl IntoIterator<Item = &'r mut Registration>,
        wait: impl std::future::Future<Output = ()>,
    ) {
        let registrations: Vec<_> = registrations.into_iter().collect();
        // Set once one of them warned, in an earlier wait or by claiming it in this one.
        let warning = AtomicBool::new(registrations.iter().any(|r| r.warned));
        let keep = async {
            join_all(registrations.into_iter().map(|r| r.keep(&warning))).await;
            // Reached only with no registration at all: nothing to keep beside the wait.
            std::future::pending::<std::convert::Infallible>().await
        };
        tokio::select! {
            () = wait => {}
            never = keep => match never {},
        }
    }

    /// The call waits from now on (its first try found the lock held).
    pub(crate) fn waiting(&mut self) {
        if self.started.is_none() {
            let now = Instant::now();
            self.started = Some(now);
            self.next_refresh = now;
        }
    }

    /// For a group: the call waits from now on for the lock of each of `registrations`
    /// that `waits_for` names (by its node's index), if not yet. Each that starts takes
    /// the owner's record on its client from those that started before.
    pub(crate) fn group_waiting(
        registrations: &mut [(usize, Box<Registration>)],
        waits_for: impl Fn(usize) -> bool,
    ) {
        for i in 0..registrations.len() {
            let (index, registration) = &registrations[i];
            if !waits_for(*index) || registration.started.is_some() {
                continue;
            }
            let core = registration.core.clone();
            for (_, other) in registrations.iter_mut() {
                if Arc::ptr_eq(&other.core, &core) {
                    other.records = false;
                }
            }
            let registration = &mut registrations[i].1;
            registration.records = true;
            registration.waiting();
        }
    }

    /// Runs beside the call's wait, and is dropped when the wait ends: writes the entry at
    /// once, refreshes it every third of its life, and warns when the wait grows long,
    /// unless the call has warned, or `warning` says another of its entries is warning.
    async fn keep(&mut self, warning: &AtomicBool) -> std::convert::Infallible {
        let Some(started) = self.started else {
            return std::future::pending().await;
        };
        let warn_at = started + self.core.settings.long_wait_warning;
        let mut warns = !warning.load(Relaxed);
        loop {
            let next = match warns {
                false => self.next_refresh,
                true => self.next_refresh.min(warn_at),
            };
            tokio::time::sleep_until(next).await;
            if Instant::now() >= self.next_refresh {
                self.refresh().await;
            }
            if warns && Instant::now() >= warn_at {
                warns = false;
                if !warning.swap(true, Relaxed) {
                    self.warn(started.elapsed()).await;
                    // Only once it is out: a wait that ends during the walk (another node's
                    // unlock woke a group) warns in its next round, if it goes on.
                    self.warned = true;
                }
            }
        }
    }

    /// Writes or refreshes the entry; the next refresh is due only once this one is done,
    /// so that a refresh cut short by the end of a wait is sent again by the next.
    async fn refresh(&mut self) {
        let ttl = self.core.settings.watchdog_timeout;
        self.written = true;
        let (waiters, record) = self.keys();
        let record = self.records.then_some(record.as_str());
        let (owner, lock, name) = (&self.owner, &self.lock_key, &self.core.settings.client_name);
        let join = |conn| waits::join(conn, &waiters, record, owner, lock, name, ttl);
        match self.core.connections.once(join).await {
            Ok(()) => {}
            // A setting the operator must fix, said once per process rather than at every
            // refresh of every wait.
            Err(e) if e.is_permission_denied() && !PERMISSION_WARNED.swap(true, Relaxed) => {
                tracing::warn!(
                    lock = %self.lock_key,
                    error = %e,
                    "wait registry: not recorded: the ACL user needs ~redis_rlock_wait* \
                     (see the operations docs)"
                );
            }
            Err(e) => {
                tracing::debug!(lock = %self.lock_key, error = %e, "wait registry: not recorded")
            }
        }
        self.next_refresh = Instant::now() + ttl / 3;
    }

    /// The registry's set of the lock's waiters, and the waiting task's record.
    fn keys(&self) -> (String, String) {
        (
            Derived::Waiters.of(&self.lock_key),
            waiting_record(&self.owner),
        )
    }

    /// Logs the long wait, with the lock's holders and the cycle of waits through them.
    async fn warn(&self, waited: Duration) {
        let walked = |conn| walk(conn, &self.owner, &self.lock_key);
        match self.core.connections.once(walked).await {
            Ok(Walk { holders, cycle }) => tracing::warn!(
                lock = %self.lock_key,
                waited_ms = waited.as_millis() as u64,
                holders = %holders.join(", "),
                deadlock = cycle.as_deref().unwrap_or("none found"),
                "still waiting for a lock"
            ),
            Err(e) => tracing::warn!(
                lock = %self.lock_key,
                waited_ms = waited.as_millis() as u64,
                error = %e,
                "still waiting for a lock (its holders could not be read)"
            ),
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if !self.written {
            return;
        }
        // In the background: the call that waited returns at once, and a later wait of
        // the same owner starts with a try and a subscription, so this leave reaches
        // Redis before that wait's entry does.
        let core = self.core.clone();
        let (waiters, record) = self.keys();
        let record = self.records.then_some(record);
        let (owner, lock_key) = (self.owner.clone(), self.lock_key.clone());
        self.core.spawn(async move {
            let record = record.as_deref();
            let leave = |conn| waits::leave(conn, &waiters, record, &owner, &lock_key);
            if let Err(e) = core.connections.once(leave).await {
                tracing::debug!(lock = %lock_key, error = %e, "wait registry: entry left to expire");
            }
        });
    }
}

/// What the long-wait warning reports.
struct Walk {
    /// The lock's holders.
    holders: Vec<String>,
    /// The cycle of waits found from them, written out.
    cycle: Option<String>,
}

/// Walks from `owner`, waiting for `lock_key`, to the lock's holders, what they wait for,
/// and so on, until an owner comes round again (a cycle: a deadlock, unless one of its
/// waits has a deadline) or the walk runs out.
async fn walk(conn: Conn, owner: &str, lock_key: &str) -> RedisResult<Walk> {
    struct Step {
        owner: String,
        client: Option<String>,
        lock: String,
        holders: Vec<String>,
        next: usize,
    }
    // A group's owner may hold the lock on the node it is recorded on (a round's grant not
    // yet rolled back): that is not what it waits for.
    let mut holders = waits::holders(&conn, lock_key).await?;
    holders.retain(|holder| holder != owner);
    let mut path = vec![Step {
        owner: owner.to_string(),
        client: None,
        lock: lock_key.to_string(),
        holders: holders.clone(),
        next: 0,
    }];
    let mut seen = vec![owner.to_string()];
    while let Some(step) = path.last_mut() {
        let Some(holder) = step.holders.get(step.next).cloned() else {
            path.pop();
            continue;
        };
        step.next += 1;
        if let Some(start) = path.iter().position(|step| step.owner == holder) {
            return Ok(Walk {
                holders,
                cycle: Some(describe(&path[start..])),
            });
        }
        if seen.len() >= WALK_OWNERS || seen.contains(&holder) {
            continue;
        }
        seen.push(holder.clone());
        let Some(Waiting { lock, client }) =
            waits::waits_for(&conn, &waiting_record(&holder)).await?
        else {
            continue;
        };
        let holders_there = waits::holders(&conn, &lock).await?;
        path.push(Step {
            owner: holder,
            client,
            lock,
            holders: holders_there,
            next: 0,
        });
    }
    return Ok(Walk {
        holders,
        cycle: None,
    });

    /// `a (client) waits for `x`, held by b (client), which waits for `y`, held by a`.
    fn describe(cycle: &[Step]) -> String {
        let mut text = String::new();
        for (i, step) in cycle.iter().enumerate() {
            let who = match &step.client {
                Some(client) => format!("{} ({client})", step.owner),
                None => step.owner.clone(),
            };
            let _ = match i {
                0 => write!(text, "{who} waits for `{}`", step.lock),
                _ => write!(text, ", held by {who}, which waits for `{}`", step.lock),
            };
        }
        let _ = write!(text, ", held by {}", cycle[0].owner);
        text
    }
}
