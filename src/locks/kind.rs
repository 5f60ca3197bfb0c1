//! The lock kinds as types ([`Reentrant`], [`Fair`](crate::Fair), [`Fenced`](crate::Fenced),
//! [`Read`](crate::Read), [`Write`](crate::Write)).
//!
//! A kind is chosen by type (`Lock<Fair>`), and each type names its description in the
//! protocol ([`protocol::kinds`](crate::protocol::kinds)): its names, scripts and the shape
//! of their calls. From then on the engine reads that description (a read-write side is
//! renewed with its read timeouts, a fair lock's waiters queue, a fenced lock draws
//! tokens), never which kind it is.

use crate::protocol::kinds::reentrant::REENTRANT;
use crate::protocol::kinds::Kind;

/// The kind of a [`Lock`](crate::Lock): [`Reentrant`], [`Fair`](crate::Fair),
/// [`Fenced`](crate::Fenced), or a read-write lock's [`Read`](crate::Read) or
/// [`Write`](crate::Write). Sealed: the kinds are this crate's, each with its own scripts.
pub trait LockKind: sealed::Sealed + Send + Sync + 'static {}

pub(crate) mod sealed {
    /// What the engine needs of a kind; public in name only, so that no other crate can
    /// add a kind.
    pub trait Sealed {
        /// The type name shown by `Debug`.
        const TYPE_NAME: &'static str;
        /// What the kind is in Redis.
        const KIND: &'static crate::protocol::kinds::Kind;
    }
}

/// The kind of an [`RLock`](crate::RLock): reentrant, a release wakes any one waiter
/// (Redisson's `RLock`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reentrant;

impl LockKind for Reentrant {}

impl sealed::Sealed for Reentrant {
    const TYPE_NAME: &'static str = "RLock";
    const KIND: &'static Kind = &REENTRANT;
}
