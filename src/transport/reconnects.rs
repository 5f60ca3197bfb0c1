//! [`Reconnects`]: who is told when a client gets Redis back after losing it.

use std::sync::Arc;

use crate::util::poison;

/// The services told when the client reconnects to Redis after losing it (the shared
/// connection replaced, the pub/sub connection re-established): Redis may have restarted or
/// failed over and forgotten locks, which the watchdog and the fixed-lease check then look
/// for at once.
#[derive(Default)]
pub(crate) struct Reconnects {
    listeners: std::sync::Mutex<Vec<Arc<tokio::sync::Notify>>>,
}

impl Reconnects {
    /// A notification for one more listener. Each keeps a permit if it is busy when told,
    /// so that a reconnection during a round is seen by the next one.
    pub(crate) fn listen(&self) -> Arc<tokio::sync::Notify> {
        let notify = Arc::new(tokio::sync::Notify::new());
        poison::locked(&self.listeners).push(notify.clone());
        notify
    }

    /// Tells every listener.
    pub(crate) fn tell(&self) {
        for listener in poison::locked(&self.listeners).iter() {
            listener.notify_one();
        }
    }
}
