//! The interop suite of redis-rlock: scenarios that interleave this crate and Redisson, the
//! Java library whose Redis layout it shares, on one Redis, step by step.
//!
//! The Java side is a driver program (`interop/redisson/`, one Redisson client per JVM)
//! that the tests start as a child process and script over stdin/stdout ([`driver`]); the
//! Rust side is this crate's `Client`, in the same test. Both act on a `redis-server` the
//! test starts itself (the `testkit` harness), and the tests look at what each wrote with
//! raw commands ([`view`]). Measured figures (wake-up latencies across the two languages)
//! are reported through [`figures`].
//!
//! Run it with `interop/redisson/run` (it builds the driver first); the crate is not a
//! default member of the workspace, so a plain `cargo test` never needs Java.
//! `interop/README.md` describes the scenarios and the differences found.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod check;
pub mod driver;
pub mod figures;
pub mod synchronizers;
pub mod view;

pub use driver::{JavaThread, Kind, Pending, Redisson, RedissonOptions, Reply};
pub use figures::{figure, now_us};
