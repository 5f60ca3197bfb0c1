//! The locks: the kinds ([`kind`]), the handle every kind shares ([`Lock`]), the engine
//! that takes and releases them ([`attempt`], [`wait`], [`acquire`], [`release`]) and the
//! guard a hold gives ([`LockGuard`]).
//!
//! Everything here reaches the client's connections and services through its
//! [`Core`](crate::core); nothing imports the public [`Client`](crate::Client).

pub(crate) mod acquire;
pub(crate) mod attempt;
pub(crate) mod distributed;
pub(crate) mod fair;
pub(crate) mod fenced;
pub(crate) mod guard;
pub(crate) mod kind;
pub(crate) mod lock;
pub(crate) mod release;
pub(crate) mod wait;

pub use distributed::{DistributedGuard, DistributedLock};
pub use fair::{Fair, FairLock};
pub use fenced::{Fenced, FencedLock};
pub use guard::LockGuard;
pub use kind::{LockKind, Reentrant};
pub use lock::{Lock, RLock};
