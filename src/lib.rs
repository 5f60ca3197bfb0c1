#![doc = include_str!("../README.md")]
//!
//! # Layout
//!
//! The source is in layers, each a folder of `src/`, each using only those before it
//! (`tests/programs/layering.rs` checks it):
//!
//! - `error` and `util`: the error type and Redis error classification; small utilities
//!   (futures that finish after their caller left, argument checks, time, locks).
//! - `config`: a client's checked settings and its password-safe URL.
//! - [`protocol`]: the Redisson layout: key and channel names, the owner field, the Lua
//!   scripts beside their Rust bindings, EVALSHA and batching.
//! - `holds`: what a client holds, locally: holds, leases, validity and the watch list.
//! - [`transport`]: connections, the pub/sub unlock listener, replica sync, server and
//!   permission checks.
//! - `services`: a client's background tasks: watchdog, fair-queue heartbeat, latch
//!   reaper, lease check.
//! - `client_core`: one client's connections, holds and services, which every lock of it
//!   shares.
//! - [`locks`]: the lock kinds (the read-write lock's in [`locks::read_write`]), the
//!   acquire, wait and release engine, and guards.
//! - [`groups`]: [`RedLock`] and [`MultiLock`].
//! - [`sync`]: [`Semaphore`], [`PermitExpirableSemaphore`] and [`CountDownLatch`], on the
//!   same waiting loop.
//! - `client`: the public [`Client`], [`ClientBuilder`] and [`Status`].
//! - [`operations`]: documentation only: metrics, traces, alerts, stuck locks.
#![forbid(unsafe_code)]
#![warn(
    missing_docs,
    unreachable_pub,
    rust_2018_idioms,
    missing_debug_implementations
)]

mod client;
mod client_core;
mod config;
mod error;
pub mod groups;
mod holds;
pub mod locks;
pub mod operations;
pub mod protocol;
mod services;
pub mod sync;
pub mod transport;
mod util;

/// The redis-rs crate this one is built on, whose [`RedisError`](redis::RedisError) the
/// public API hands out inside [`Error::Redis`]: match on it with the same version.
pub use redis;

pub use client::{Client, ClientBuilder, NotReleased, PubSubMode, ShutdownReport, Status};
pub use config::server_url::{redact_url, url_secrets};
pub use error::{Error, LostReason, Result};
pub use groups::guard::GroupGuard;
pub use groups::{MultiLock, RedLock};
// Every lock kind and its handle type, from the table of kinds: a new kind needs no line here.
#[doc(no_inline)]
pub use locks::kind::*;
pub use locks::{
    DistributedGuard, DistributedLock, ForceUnlockOutcome, Lock, LockGuard, RLock, ReadWriteLock,
};
pub use protocol::Owner;
pub use sync::{
    CountDownLatch, ExpirablePermit, PermitExpirableSemaphore, Semaphore, SemaphoreGuard,
};
