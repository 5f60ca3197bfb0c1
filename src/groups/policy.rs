//! How many of a group's locks make it held ([`GroupPolicy`]: [`Majority`] for a
//! [`RedLock`](crate::RedLock), [`All`] for a [`MultiLock`](crate::MultiLock)), and which
//! kinds of lock a group can be made of ([`GroupKind`]).

use crate::locks::{Fenced, LockKind, Reentrant};

/// How many of a group's locks must be held for the group to be held. Sealed: the policies
/// are [`Majority`](crate::groups::Majority) and [`All`](crate::groups::All).
pub trait GroupPolicy: sealed::Sealed + Send + Sync + 'static {}

pub(crate) mod sealed {
    pub trait Sealed {
        /// The type name shown by `Debug`.
        const TYPE_NAME: &'static str;
        /// Whether every lock must be on a master of its own (a majority is only worth
        /// something over independent masters).
        const DISTINCT_NODES: bool;
        /// How many of `total` locks make the group held.
        fn quorum(total: usize) -> usize;
    }

    /// The lock kinds a group can be made of: those whose waiters all hear one unlock
    /// channel (a fair lock's waiters wait on channels of their own, in a queue a group
    /// never joins).
    pub trait GroupableKind {
        /// Whether each node's acquire draws a fencing token, which the group must make
        /// agree across its majority ([`fence`](crate::groups::fence)).
        const DRAWS_TOKENS: bool;
    }
}

/// The kinds of lock a [`LockGroup`](super::LockGroup) can be made of: [`Reentrant`] and
/// [`Fenced`](crate::Fenced). Sealed.
pub trait GroupKind: LockKind + sealed::GroupableKind {}

impl sealed::GroupableKind for Reentrant {
    const DRAWS_TOKENS: bool = false;
}
impl GroupKind for Reentrant {}
impl sealed::GroupableKind for Fenced {
    const DRAWS_TOKENS: bool = true;
}
impl GroupKind for Fenced {}

/// The policy of a [`RedLock`](crate::RedLock): a majority of its locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Majority;

impl GroupPolicy for Majority {}

impl sealed::Sealed for Majority {
    const TYPE_NAME: &'static str = "RedLock";

    const DISTINCT_NODES: bool = true;

    fn quorum(total: usize) -> usize {
        total / 2 + 1
    }
}

/// The policy of a [`MultiLock`](crate::MultiLock): every one of its locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct All;

impl GroupPolicy for All {}

impl sealed::Sealed for All {
    const TYPE_NAME: &'static str = "MultiLock";

    const DISTINCT_NODES: bool = false;

    fn quorum(total: usize) -> usize {
        total
    }
}
