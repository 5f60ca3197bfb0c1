#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(
    missing_docs,
    unreachable_pub,
    rust_2018_idioms,
    missing_debug_implementations
)]

mod client;
mod config;
mod core;
mod error;
pub mod groups;
mod holds;
mod locks;
mod protocol;
mod services;
mod transport;
mod util;

pub use client::{Client, ClientBuilder, Status};
pub use error::{Error, LostReason, Result};
pub use groups::guard::GroupGuard;
pub use groups::{MultiLock, RedLock};
pub use locks::{
    DistributedGuard, DistributedLock, Fair, FairLock, Fenced, FencedLock, Lock, LockGuard,
    LockKind, RLock, Reentrant,
};
