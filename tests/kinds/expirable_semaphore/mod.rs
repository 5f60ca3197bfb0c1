//! `PermitExpirableSemaphore` (Redisson's `RPermitExpirableSemaphore`, 3.52 layout): the
//! count and the permits' sorted set as raw commands see them (ids of 16 bytes whose hex is
//! `id()`, expiries on the server's clock); never more holders than permits; a waiter woken
//! by a release far sooner than the re-check bound, and by an expiry that no message
//! announces; a killed holder's permit coming back after its lease; `lost()` at the lease's
//! end once Redis agrees (or cannot answer), on a release by id and after a restarted
//! server; a lease extended by id elsewhere or by the holder kept, and released past the
//! deadline; releasing a lost permit refused
//! and harmless; cancelled waits taking nothing; bad input writing nothing; a short cluster
//! run in both pub/sub modes.
//!
//! One file per theme: `layout.rs` (the count and the permits in Redis, on a server and on
//! a cluster, and never more holders than permits), `waking.rs` (waiters woken by a
//! release, by an expiry, by a killed holder's lease running out; cancelled waits),
//! `leases.rs` (`lost()`, releases by id, restarts, leases extended and deadlines) and
//! `refusals.rs` (bad input and a user without a command). This file holds their bounds
//! and a raw reading of the permits.

mod layout;
mod leases;
mod refusals;
mod waking;

use std::time::Duration;

use redis::aio::MultiplexedConnection;

/// For state that settles quickly, on a loaded machine.
const GENEROUS: Duration = Duration::from_secs(10);
/// What "woken by the message" means: well under the re-check bound.
const WOKEN_WITHIN: Duration = Duration::from_millis(1_000);
/// The lease of the permits the tests take: far longer than any test.
const LEASE: Duration = Duration::from_secs(30);

/// The permits' sorted set: (id in hex, expiry score).
async fn permits(raw: &mut MultiplexedConnection, timeouts: &str) -> Vec<(String, i64)> {
    let members: Vec<(Vec<u8>, f64)> = redis::cmd("ZRANGE")
        .arg(timeouts)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query_async(raw)
        .await
        .unwrap();
    members
        .into_iter()
        .map(|(id, score)| {
            let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
            (hex, score as i64)
        })
        .collect()
}
