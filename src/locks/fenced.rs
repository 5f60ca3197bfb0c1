//! [`FencedLock`]: the reentrant lock whose every acquire draws a fencing token, with
//! Redisson's `RFencedLock` layout; and [`Client::fenced_set`](crate::Client::fenced_set), a resource's side of
//! fencing.

use crate::client_core::Core;
use crate::error::{Error, Result};
use crate::protocol::kinds::fenced;
use crate::protocol::names::LockNames;
use crate::protocol::slot::key_slot;
use crate::transport::explain;
use crate::util::validate;

// Defined in the table of kinds; named here too, where `locks` lists them.
pub use crate::locks::kind::{Fenced, FencedLock};

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
            return Err(Error::cross_slot(key, slot, fence, fence_slot));
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
