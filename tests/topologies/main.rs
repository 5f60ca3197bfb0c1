//! Redis Cluster and Sentinel: locks on the master of their slot, pub/sub, failovers,
//! migrations, slow nodes and groups over clusters.
//!
//! One test binary for these files (each a module), so that the suite links a few
//! binaries rather than one per file. TESTING.md says what each file proves.

mod cluster;
mod cluster_batches;
mod cluster_failover;
mod cluster_pubsub;
mod cluster_replica_sync;
mod cluster_slow_script;
mod cluster_synchronizers;
mod redlock_clusters;
mod redlock_slow_nodes;
mod sentinel;
mod sentinel_synchronizers;
