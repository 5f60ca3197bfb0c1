//! The torture run: worker processes take one lock again and again and make fenced writes
//! to a shared resource while a fault schedule pauses and kills holders, restarts the
//! lock server and kills its connections; a checker then verifies that no stale write was
//! accepted, every paused holder was told, no call hung and the lock was always acquirable
//! again. In `cluster` mode the workers also take and give back permits of a semaphore
//! between their sections, and the checker verifies that no more permits were ever held
//! at once than the semaphore has, and that none is lost at the end.
//!
//! The short runs that `cargo test` makes are in `tests/torture.rs`; the long run is the
//! `torture` binary (`src/main.rs`). Both start their workers by running their own program
//! again with [`WORKER_ENV`](config::WORKER_ENV) set, which [`worker_from_env`] answers.
//!
//! How the pieces fit: the [`coordinator`] starts the servers and a [`fleet`] of worker
//! processes (each running [`worker`]), which report [`events`] on their stdout; the
//! [`faults`] act on them; the [`checker`] reads the events regrouped by acquisition
//! ([`history`]) and the [`resource`]'s log; the [`summary`] prints it all. The lock itself
//! is reached only through the [`backend`] seam.

pub mod backend;
pub mod checker;
pub mod clock;
pub mod config;
pub mod coordinator;
pub mod events;
pub mod faults;
pub mod fleet;
pub mod history;
pub mod resource;
pub mod steps;
pub mod summary;
pub mod worker;

pub use config::{RunConfig, WorkerCommand};
pub use coordinator::run;
pub use worker::worker_from_env;
