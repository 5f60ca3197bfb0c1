//! Fencing tokens for a [`RedLock`](crate::RedLock) of fenced locks: one token per acquire
//! of the group, greater than every token any earlier holder of the group was given, even
//! though each holder talks to a majority of its own.
//!
//! Each master's acquire draws a token from that master's counter. The group's token is
//! the greatest its majority drew, and before the guard is returned it is written back:
//! every master that still holds the lock raises its counter to it (`fenced_raise.lua`),
//! and a majority must confirm. The argument:
//!
//! - Let holder A be given token `T`. A majority `W` of masters confirmed, each while A
//!   held the lock there, that its counter is at least `T`.
//! - A later holder B holds a majority `Q` of its own, and majorities overlap: some master
//!   `m` is in both `W` and `Q`. B took the lock on `m` only once A's hold there was gone,
//!   so after A's write-back on `m`: B's draw on `m` is greater than `T`, and B's token,
//!   the greatest of its draws, is too.
//!
//! It assumes, as the lock itself does, that a master does not forget: a master restarted
//! without its data resets its counter. Write-backs also reach the masters that answer
//! after the majority, so a token is vouched for by every master that held the lock; the
//! argument survives as many forgetful masters as that number exceeds a majority.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;

use crate::groups::group::Node;
use crate::locks::guard::LockGuard;
use crate::protocol::kinds::fenced;

/// The group's token: the greatest that `held` drew, once at least `quorum` of the masters
/// in `held` confirmed that they still hold the lock and their counters are at least it.
/// `None` when too few confirmed in time.
pub(crate) async fn agree(
    nodes: &[Node],
    held: &[(usize, LockGuard)],
    owner: &Arc<str>,
    quorum: usize,
    node_timeout: Duration,
) -> Option<u64> {
    let token = held
        .iter()
        .filter_map(|(_, hold)| hold.fencing_token())
        .max()?;
    let raises = held
        .iter()
        .map(|(index, _)| raise(&nodes[*index], owner, token, node_timeout));
    let confirmed = join_all(raises).await.into_iter().filter(|ok| *ok).count();
    (confirmed >= quorum).then_some(token)
}

/// Raises `node`'s counter to at least `token` while `owner` holds the lock there, within
/// `node_timeout`. Returns whether that was confirmed.
pub(crate) async fn raise(node: &Node, owner: &str, token: u64, node_timeout: Duration) -> bool {
    let raise = |conn| fenced::fenced_raise(conn, &node.names, owner, token);
    let raised = async {
        let raised = node.core.connections.once(raise).await;
        raised.inspect_err(|e| tracing::debug!(lock = %node.names.key, error = %e, "could not raise a fencing counter"))
    };
    matches!(
        tokio::time::timeout(node_timeout, raised).await,
        Ok(Ok(true))
    )
}
