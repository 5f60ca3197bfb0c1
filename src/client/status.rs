//! [`Status`]: a snapshot of what one client is doing, for diagnostics and tests.

/// What a [`Client`](crate::Client) holds and waits for at one moment, from
/// [`Client::status`](crate::Client::status). Counts are read one after the other, not
/// atomically together: under load they may disagree by the calls in flight.
///
/// ```no_run
/// # async fn demo(client: redis_rlock::Client) -> redis_rlock::Result<()> {
/// let guard = client.lock("report").lock().await?;
/// let status = client.status();
/// assert_eq!(status.held_locks, 1);
/// assert!(status.watchdog_running);
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Status {
    /// (lock, owner) holds the client tracks, reentrant holds counting once, and the
    /// expirable permits it holds (one each).
    pub held_locks: usize,
    /// Of those, the holds the watchdog renews (taken without a fixed lease).
    pub watchdog_holds: usize,
    /// Whether the watchdog is renewing anything: true while a watchdog hold is live, false
    /// from the moment the last one is released.
    pub watchdog_running: bool,
    /// Fair-lock queue places the client keeps alive for its waiting tasks.
    pub queued_waiters: usize,
    /// Unlock channels Redis confirmed the client's subscription to: one per lock with
    /// local waiters, and one per waiting task for fair locks.
    pub subscribed_channels: usize,
}
