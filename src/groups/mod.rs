//! Groups of locks held as one: [`RedLock`] (a majority of independent
//! masters) and [`MultiLock`] (every lock), both a [`LockGroup`] with
//! a [`GroupPolicy`].
//!
//! Each node is asked with the single lock's own acquire attempt (its script, its hold in
//! that client's registry, renewal by that client's watchdog, and its undo when an answer
//! comes after the caller left), all at once and with one owner field, so that a re-entry
//! is a re-entry on every node. The waiting between rounds is the single lock's waiting
//! loop. A group of fenced locks also makes its token agree across majorities before it
//! returns.
//!
//! This module is public for the plumbing the group types are made of; use the group types
//! themselves, [`RedLock`] and [`MultiLock`], from the
//! crate root.

mod contender;
pub(crate) mod fence;
mod group;
pub(crate) mod guard;
mod multi_lock;
mod node;
mod policy;
mod red_lock;
mod round;

pub use group::LockGroup;
pub use multi_lock::MultiLock;
pub use policy::{All, GroupKind, GroupPolicy, Majority};
pub use red_lock::RedLock;
