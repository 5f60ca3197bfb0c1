//! Deleting request latches in batches, off the request's path.
//!
//! A Redis Cluster or Sentinel client's semaphore and count-down latch count changes leave
//! a latch key
//! (`redisson_unlock_latch:{<name>}:<request id>`, see `sync::call`) that has done its job
//! once the reply is in. Redisson deletes each with its own command; here they are collected
//! and removed with one UNLINK per [`KEYS_PER_COMMAND`], so that a count change costs one
//! round trip, and a burst of them one extra command in all. Lock releases leave none: a
//! retried release knows its own earlier try by the owner's count (see
//! [`crate::locks::release`]).
//!
//! No timer waits for a batch to fill: on the multi-thread runtime a pending timer made the
//! runtime's worker wake once more per lock-unlock pair (W1 in BENCHMARKS.md: 3.7 worker
//! wake-ups per pair instead of 2.7, and 1.07× the floor's p50 instead of 1.01×). A batch
//! goes out when it is full, when a request finds the oldest latch older than
//! [`FLUSH_AFTER`], or when the client is dropped; a latch left behind in between expires by
//! itself, like one whose client went away.

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::transport::connections::Connections;
use crate::util::lifecycle::Background;
use crate::util::poison;

/// Keys per UNLINK, to keep each command small.
const KEYS_PER_COMMAND: usize = 512;

/// Age of the oldest waiting latch at which the next request sends the batch, however small:
/// short next to a latch's time-to-live (seconds), long next to one round trip.
const FLUSH_AFTER: Duration = Duration::from_secs(1);

pub(crate) struct LatchReaper {
    pending: Mutex<Pending>,
    connections: Weak<Connections>,
    /// Where the UNLINKs run: the client's runtime, which drives its connections, and
    /// where its shutdown waits for them.
    background: Background,
}

#[derive(Default)]
struct Pending {
    latches: Vec<Arc<str>>,
    /// When the first of `latches` arrived.
    since: Option<Instant>,
}

impl LatchReaper {
    pub(crate) fn new(connections: &Arc<Connections>, background: Background) -> Self {
        LatchReaper {
            pending: Mutex::new(Pending::default()),
            connections: Arc::downgrade(connections),
            background,
        }
    }

    /// Queues `latch` for deletion, and sends the batch when it is due.
    pub(crate) fn forget(&self, latch: Arc<str>) {
        let due = {
            let mut pending = poison::locked(&self.pending);
            let since = *pending.since.get_or_insert_with(Instant::now);
            pending.latches.push(latch);
            pending.latches.len() >= KEYS_PER_COMMAND || since.elapsed() >= FLUSH_AFTER
        };
        if due {
            self.send_pending();
        }
    }

    /// Deletes every latch waiting for its batch, now: the client shuts down.
    pub(crate) async fn flush(&self) {
        if let Some((latches, connections)) = self.take_pending() {
            unlink(latches, connections).await;
        }
    }

    /// Sends the latches waiting for their batch, in the background: the batch is due, or
    /// the client is going.
    pub(crate) fn send_pending(&self) {
        if let Some((latches, connections)) = self.take_pending() {
            self.background.spawn(unlink(latches, connections));
        }
    }

    /// The latches waiting for their batch, if any, and the connections to send them on,
    /// unless the client is going away (they then expire by themselves).
    fn take_pending(&self) -> Option<(Vec<Arc<str>>, Arc<Connections>)> {
        let latches = {
            let mut pending = poison::locked(&self.pending);
            pending.since = None;
            std::mem::take(&mut pending.latches)
        };
        let connections = self.connections.upgrade()?;
        (!latches.is_empty()).then_some((latches, connections))
    }
}

/// Deletes `latches`, best-effort: those it cannot expire by themselves.
async fn unlink(latches: Vec<Arc<str>>, connections: Arc<Connections>) {
    for chunk in latches.chunks(KEYS_PER_COMMAND) {
        let mut unlink = redis::cmd("UNLINK");
        for latch in chunk {
            unlink.arg(&**latch);
        }
        let unlink = |mut conn| async move { unlink.query_async::<i64>(&mut conn).await };
        if let Err(e) = connections.once(unlink).await {
            tracing::debug!(error = %e, latches = chunk.len(), "request latches left to expire");
        }
    }
}
