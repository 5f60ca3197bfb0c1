//! What every workload of the benchmark shares: the options read from the environment, the
//! redis-server and where it and the client run, the tokio runtime flavours, the raw floors,
//! the statistics and the printing. Each workload is a bench target of its own
//! (`benches/w1.rs` ... `benches/w6.rs`) that includes this module and uses the test harness,
//! the `testkit` crate.
#![allow(dead_code)]

pub mod beside;
pub mod cluster;
pub mod contend;
pub mod floor;
pub mod interleave;
pub mod jvm;
pub mod options;
pub mod placement;
pub mod redis_use;
pub mod report;
pub mod runtime;
pub mod server;
pub mod stats;
