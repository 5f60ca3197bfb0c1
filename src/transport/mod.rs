//! Reaching Redis: the connections ([`connection`]: a shared multiplexed connection and a
//! pool, reconnected and retried), the unlock listener on its own pub/sub connection
//! ([`pubsub`]), replica sync ([`replica_sync`]), what a server must be to hold locks
//! ([`server_check`]), whether the user may run a kind's commands ([`permissions`]), and
//! refusals turned into typed errors ([`explain`]).
//!
//! A cluster or sentinel variant plugs in here, behind [`Connections`](connection::Connections)
//! and the listener, without touching lock code.

pub(crate) mod connection;
pub(crate) mod explain;
pub(crate) mod permissions;
pub(crate) mod pubsub;
pub(crate) mod replica_sync;
pub(crate) mod server_check;
