//! Test harness of redis-rlock: every integration test starts its own throw-away
//! `redis-server` processes on free loopback ports, so tests can run in parallel and can
//! kill, freeze or restart "their" server without disturbing anyone else.
//!
//! By job:
//! - [`servers`]: starting, killing, freezing and restarting servers; several masters at
//!   once; a replica.
//! - [`cluster`]: a local Redis Cluster made by hand; failover, killed masters, slot
//!   migration.
//! - [`sentinel`]: a master, a replica and three sentinels; forced failover, killed master.
//! - [`clients`]: lock clients set up for tests.
//! - [`inspect`]: Redis as raw commands see it (a lock's hash, TTL, a fair lock's queue,
//!   `INFO` figures).
//! - [`wait`]: bounded waits for local state, for Redis state to settle, for a call.
//! - [`wake`]: a waiter confirmed listening, and how long after its release it returned.
//! - [`calls`]: every acquire and read call of a lock, each bounded.
//! - [`fair`]: fair-lock waiters confirmed in the queue, and waiters of a crashing process.
//! - [`every_kind`]: one hold of every kind, and waiters on each, for shutdown tests.
//! - [`group`]: lock groups over several masters, and which masters hold a key.
//! - [`acl`]: ACL users with the README's rules and variations of them.
//! - [`tls`]: a test PKI and a server with a TLS port (with the `tls` feature).
//!
//! What the tests use is also at the crate root.

pub mod acl;
pub mod calls;
pub mod clients;
pub mod cluster;
pub mod every_kind;
pub mod fair;
pub mod group;
pub mod inspect;
pub mod sentinel;
pub mod servers;
#[cfg(feature = "tls")]
pub mod tls;
pub mod wait;
pub mod wake;

pub use calls::{every_acquire, every_read};
pub use clients::{client, client_with_watchdog, fair_client};
pub use cluster::RedisCluster;
pub use inspect::{
    count_becomes, dbsize, fair_deadline, fair_queue, info_field, info_number, key_exists,
    keys_but_latches, keys_matching, lock_hash, pttl, raw_get, registry_keys, server_millis,
    waiting_record,
};
pub use redis_rlock::protocol::key_slot;
pub use sentinel::RedisSentinels;
pub use servers::{start_replica_of, RedisGroup, RedisServer};
pub use wait::{bounded, eventually, queue_becomes, settles_to};
pub use wake::{Waiting, Woken};
