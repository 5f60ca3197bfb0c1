#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(
    missing_docs,
    unreachable_pub,
    rust_2018_idioms,
    missing_debug_implementations
)]

mod acquire;
mod client;
mod config;
mod connection;
mod detach;
mod error;
mod guard;
mod hold;
mod latches;
mod lock;
mod names;
mod owner;
mod pubsub;
mod release;
mod scripts;
mod validate;
mod watchdog;

pub use client::Client;
pub use config::ClientBuilder;
pub use error::{Error, LostReason, Result};
pub use guard::LockGuard;
pub use lock::RLock;
