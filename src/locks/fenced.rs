//! [`FencedLock`]: the reentrant lock whose every acquire draws a fencing token, with
//! Redisson's `RFencedLock` layout; and [`Client::fenced_set`](crate::Client::fenced_set), a resource's side of
//! fencing.

use crate::client_core::Core;
use crate::error::{Error, Result};
use crate::locks::kind::{sealed, LockKind};
use crate::locks::lock::Lock;
use crate::protocol::kinds::fenced::{self, FENCED};
use crate::protocol::kinds::Kind;
use crate::protocol::names::LockNames;
use crate::protocol::slot::key_slot;
use crate::transport::explain;
use crate::util::validate;

/// A reentrant distributed lock whose every acquire gets a fencing token: a number strictly
/// greater than every token handed out before for the same name, read with
/// [`LockGuard::fencing_token`](crate::LockGuard::fencing_token).
///
/// A lease cannot stop a holder paused past it (a GC pause, SIGSTOP, a swapped-out process)
/// from waking up and touching the resource after another client took the lock. The token
/// lets the resource refuse it: pass the token with every write, and have the resource
/// reject a token lower than the highest it has seen ([`Client::fenced_set`](crate::Client::fenced_set) does that for
/// a Redis key).
///
/// Same methods, guard, watchdog and reentrancy as [`RLock`](crate::RLock); the acquire
/// script also `INCR`s the counter `redisson_lock_token:{<name>}` (no extra round trip),
/// on every acquire including a re-entry, as Redisson does. The counter has no expiry and
/// is never reset by this crate: tokens keep growing as long as Redis keeps the key, so
/// run Redis with persistence where tokens must grow across a restart. Made by
/// [`Client::fenced_lock`](crate::Client::fenced_lock).
///
/// ```no_run
/// # async fn demo(client: redis_rlock::Client) -> redis_rlock::Result<()> {
/// let lock = client.fenced_lock("ledger");
/// let guard = lock.lock().await?;
/// let token = guard.fencing_token().expect("a fenced lock's guard has a token");
/// // A write that a paused, stale holder could not make after a newer one:
/// let written = client.fenced_set("ledger:balance", token, b"42").await?;
/// assert!(written);
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
pub type FencedLock = Lock<Fenced>;

/// The kind of a [`FencedLock`]: reentrant, and every acquire draws a fencing token
/// (Redisson's `RFencedLock`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fenced;

impl LockKind for Fenced {}

impl sealed::Sealed for Fenced {
    const TYPE_NAME: &'static str = "FencedLock";
    const KIND: &'static Kind = &FENCED;
}

/// The body of [`Client::fenced_set`](crate::Client::fenced_set).
pub(crate) async fn fenced_set(core: &Core, key: &str, token: u64, value: &[u8]) -> Result<bool> {
    if key.is_empty() {
        return Err(Error::invalid("a fenced write needs a key"));
    }
    validate::key_length("a fenced write's key", key)?;
    let fence = LockNames::fence_of(key);
    let connections = &core.connections;
    if connections.is_cluster() {
        let (slot, fence_slot) = (key_slot(key.as_bytes()), key_slot(fence.as_bytes()));
        if slot != fence_slot {
            return Err(Error::CrossSlotName {
                name: key.to_string(),
                slot,
                other: fence,
                other_slot: fence_slot,
            });
        }
    }
    let written = connections
        .with_retries(|conn| fenced::fenced_set(conn, key, &fence, token, value))
        .await;
    match written {
        Ok(written) => Ok(written),
        Err(e) => {
            let checks = || explain::fenced_write_checks(key, &fence);
            Err(explain::explain_with(connections, "writing", key, checks, e).await)
        }
    }
}
