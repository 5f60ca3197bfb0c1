//! The background work of one client, each a task that runs only while it has work
//! ([`periodic`]): the [`watchdog`] renewing watchdog holds every third of the lease, the
//! fair-queue [`heartbeat`] keeping waiters in their places, the [`latches`] reaper deleting
//! a cluster or Sentinel client's synchronizer request latches in batches, and the [`lease_check`] of fixed-lease holds after a
//! reconnect, which on a Redis Cluster also watches for topology changes
//! ([`cluster_epoch`]).

pub(crate) mod cluster_epoch;
pub(crate) mod heartbeat;
pub(crate) mod latches;
pub(crate) mod lease_check;
pub(crate) mod periodic;
pub(crate) mod watchdog;
