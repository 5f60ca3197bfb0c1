#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(
    missing_docs,
    unreachable_pub,
    rust_2018_idioms,
    missing_debug_implementations
)]

mod acquire;
mod batch;
mod client;
mod config;
mod connection;
mod detach;
mod distributed_lock;
mod error;
mod evalsha;
mod explain;
mod fair_lock;
mod fenced_lock;
mod group_fence;
mod group_guard;
mod guard;
mod hold;
mod latches;
mod lease_check;
mod lock;
mod lock_group;
mod multi_lock;
mod names;
mod owner;
mod periodic;
mod permissions;
mod pubsub;
mod queue;
mod red_lock;
mod release;
mod replica_sync;
mod scripts;
mod server_check;
mod server_url;
mod settings;
mod validate;
mod watch_list;
mod watchdog;

pub use client::Client;
pub use config::ClientBuilder;
pub use distributed_lock::DistributedLock;
pub use error::{Error, LostReason, Result};
pub use fair_lock::{Fair, FairLock};
pub use fenced_lock::{Fenced, FencedLock};
pub use group_guard::GroupGuard;
pub use guard::LockGuard;
pub use lock::{Lock, LockKind, RLock, Reentrant};
pub use lock_group::{GroupKind, GroupPolicy, LockGroup};
pub use multi_lock::{All, MultiLock};
pub use red_lock::{Majority, RedLock};
