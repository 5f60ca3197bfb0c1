//! Deleting unlock latches in batches, off the unlock path.
//!
//! Every unlock leaves a latch key (see [`crate::locks::release`]) that has done its job once the
//! reply is in. Redisson deletes each with its own command; here they are collected and
//! removed with one UNLINK per flush, so that an unlock costs one round trip, and a burst
//! of unlocks one extra command in all. A latch not yet flushed when the client goes away
//! expires by itself.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::Notify;

use crate::transport::connection::Connections;
use crate::util::sync;

/// How long latches gather before a flush: short next to their time-to-live, long next to
/// one round trip.
const FLUSH_EVERY: Duration = Duration::from_millis(20);

/// Keys per UNLINK, to keep each command small.
const KEYS_PER_COMMAND: usize = 512;

pub(crate) struct LatchReaper {
    pending: Arc<Mutex<Vec<Arc<str>>>>,
    wake: Arc<Notify>,
}

impl LatchReaper {
    /// Starts the flushing task on `runtime`; it ends when the reaper is dropped.
    pub(crate) fn start(connections: &Arc<Connections>, runtime: &tokio::runtime::Handle) -> Self {
        let pending = Arc::new(Mutex::new(Vec::new()));
        let wake = Arc::new(Notify::new());
        runtime.spawn(run(
            Arc::downgrade(&pending),
            wake.clone(),
            Arc::downgrade(connections),
        ));
        LatchReaper { pending, wake }
    }

    /// Queues `latch` for deletion.
    pub(crate) fn forget(&self, latch: Arc<str>) {
        sync::locked(&self.pending).push(latch);
        self.wake.notify_one();
    }
}

impl Drop for LatchReaper {
    fn drop(&mut self) {
        // Let the task see that the queue is gone, and end.
        self.wake.notify_one();
    }
}

async fn run(
    pending: Weak<Mutex<Vec<Arc<str>>>>,
    wake: Arc<Notify>,
    connections: Weak<Connections>,
) {
    loop {
        wake.notified().await;
        tokio::time::sleep(FLUSH_EVERY).await;
        let Some(queue) = pending.upgrade() else {
            return;
        };
        let latches = std::mem::take(&mut *sync::locked(&queue));
        drop(queue);
        let Some(connections) = connections.upgrade() else {
            return;
        };
        let Ok(shared) = connections.shared().await else {
            continue; // they expire by themselves
        };
        for chunk in latches.chunks(KEYS_PER_COMMAND) {
            let mut conn = shared.conn.clone();
            let mut unlink = redis::cmd("UNLINK");
            for latch in chunk {
                unlink.arg(&**latch);
            }
            let unlinked: redis::RedisResult<i64> = unlink.query_async(&mut conn).await;
            if let Err(e) = unlinked {
                tracing::debug!(error = %e, latches = chunk.len(), "unlock latches left to expire");
            }
        }
    }
}
