//! How a client reaches Redis: a shared multiplexed connection and a pool, reconnected and
//! retried; on Sentinel, the master the sentinels name; an unlock listener on pub/sub
//! connections of its own (one per node, following a cluster's slots); replica sync; the
//! checks a server must pass to hold locks, and whether the user may run each kind's
//! commands; and Redis' refusals turned into typed errors.
//!
//! # Topologies
//!
//! Every lock command goes out on one connection that is either a multiplexed connection
//! to one Redis or a redis-rs cluster connection, which routes each script call to the
//! master of its first key's hash slot; the scripts never see which.
//!
//! On a Redis Cluster ([`Client::connect_cluster`](crate::Client::connect_cluster)):
//!
//! - **No script runs twice because of the driver.** The cluster connection is built with
//!   redis-rs's retries off: redis-rs would re-send a script after a timeout or an I/O
//!   error, when it may already have run. This crate retries, after its backoff and within
//!   `retry_attempts`, only what is idempotent or certainly did not run: `MOVED`, `ASK`,
//!   `TRYAGAIN`, `CLUSTERDOWN`, `MASTERDOWN`, `LOADING`, `READONLY` (redis-rs re-reads the
//!   slot map on the redirection, so the retry goes to the new owner). Every unlock try is
//!   sent as a retry, the first too: it releases only if the owner's count shows no earlier
//!   try ran (see `locks::release`). A semaphore or latch count change carries a request
//!   latch (see [`sync`](crate::sync#retries)). An acquire that may have run is undone as on
//!   one Redis.
//! - **Failovers and migrations cost time, not errors.** Those refusals do not count
//!   against `retry_attempts`: a lock call waits them out for up to 30 s, within the wait a
//!   `try_lock_for` was given (a wait that runs out meanwhile returns `Ok(None)`, as for a
//!   lock held all along; a `try_lock`, given no wait, returns the refusal), and an unlock
//!   for up to 30 s from its start, so `lock()` and `unlock()` go through a slot migration
//!   or a failover (about two `cluster-node-timeout`s after a master died) without an error.
//! - **Locks lost to a failover are reported within about a second.** A replica promoted
//!   before it got a lock does not have it, and another client can take it there. While a
//!   client holds locks it reads the cluster's epoch (`CLUSTER INFO`, any node) every
//!   second; when it rose (a failover, a slot moved), the watchdog renews at once and the
//!   fixed-lease locks are checked, so the guard's `lost()` resolves about a second after
//!   the promotion instead of at the next renewal (a third of the lease later), or, for a
//!   fixed lease, not at all until it ran out.
//! - **Slots.** A lock's keys share its key's slot (see
//!   [`Error::CrossSlotName`](crate::Error::CrossSlotName) for names that cannot). The
//!   coalesced acquires and releases of a plain lock go out as one script call per master,
//!   declaring one slot's keys and passing the master's other slots' undeclared; a key
//!   whose slot moved is sent again alone (`protocol::batch`).
//! - **Scripts** are loaded on every node at connect when all answer; a node that answers
//!   `NOSCRIPT` (restarted, or a promoted replica) is sent the script alone, at the call.
//! - **Pub/sub is sharded** by default, as in Redisson 3.22 and later:
//!   [`PubSubMode::Auto`](crate::PubSubMode::Auto) picks `SSUBSCRIBE`/`SPUBLISH` when the
//!   cluster answers `PUBSUB SHARDNUMSUB` (Redis 7.0), probed at `build()`; `Classic` and
//!   `Sharded` force a kind. The scripts take the publish command as an argument, as
//!   Redisson's do. [`PubSubMode`](crate::PubSubMode) says which setting matches a Java
//!   service's `shardedSubscriptionMode`.
//! - **Subscriptions live on their slot's master**, in both kinds: the listener keeps one
//!   pub/sub connection per master that owns the slot of a channel some waiter wants (all of
//!   one lock's names share its key's slot), and subscribes each channel there, with a
//!   command per channel (one `SSUBSCRIBE` over several slots would fail with `CROSSSLOT`).
//! - **Subscriptions follow their slot.** The listener reads the slot map (`CLUSTER SLOTS`)
//!   again when a node drops a shard subscription on its own (the `sunsubscribe` push Redis
//!   sends after a failover or a slot migration), when a `SSUBSCRIBE` is answered `MOVED`,
//!   when a node's connection is lost, and every 2 s (every 250 ms while a subscription is
//!   missing); each channel whose slot moved is subscribed on its new master, and its
//!   waiters are woken to re-check the lock, since a message sent in the gap is lost (a
//!   classic subscription keeps hearing `PUBLISH`, which crosses the cluster, until the 2 s
//!   re-check moves it). TESTING.md has the times measured for each case. While a slot is
//!   being migrated, a sharded unlock that runs on the importing node (the lock key moved
//!   first) is not heard by waiters still subscribed on the exporting one: they are woken
//!   when the migration completes and their subscription moves.
//! - **Fair locks** pass over a dead waiter within 100 ms, as on one Redis: the scripts run on the
//!   slot's master, where the waiters subscribe, so `PUBSUB NUMSUB` (classic) or `PUBSUB
//!   SHARDNUMSUB` (sharded), which count one node's subscribers, count them. A live waiter
//!   whose subscription is moving (after a failover or a migration) looks dead meanwhile and
//!   steps back one place per release it misses, as a waiter whose connection reconnects
//!   does.
//! - **ACL users** of a cluster client need `+cluster|slots +cluster|info` (the slot map,
//!   and the epoch a client holding locks polls to notice a failover) besides the rules of the
//!   [Security section](crate#security), and with sharded pub/sub `+spublish +ssubscribe
//!   +sunsubscribe +pubsub|shardnumsub` (checked at the first call of each lock kind, and
//!   reported by name). A user without `+pubsub|shardnumsub` makes `Auto` pick classic
//!   pub/sub.
//! - **Replica sync** waits on the master of each lock's slot (see below).
//! - **Connections.** The cluster connection keeps one socket per node and repairs them
//!   itself; there is no pool, and background work shares it.
//!
//! # Sentinel
//!
//! A Sentinel client ([`Client::connect_sentinel`](crate::Client::connect_sentinel)) asks the
//! sentinels, in the order given, for the master they monitor under the name given
//! (`SENTINEL GET-MASTER-ADDR-BY-NAME`), and talks to that master as a standalone client
//! would: one shared connection, a pool, one pub/sub connection.
//!
//! - **Following a failover.** The client listens for `+switch-master` on one sentinel and
//!   asks them again every second besides, and at once when a call on the master fails in
//!   a way a failover explains (`READONLY`, a lost connection). When they name another
//!   master, lock calls, the pool (renewals, replica sync) and the pub/sub connection move
//!   to it: the next call opens its connection there, and calls already sent finish where
//!   they were sent (`tests/topologies/sentinel.rs` measures how soon; see TESTING.md).
//! - **Why not wait for `READONLY`.** The old master keeps taking writes until the sentinels
//!   turn it into a replica, about 10 s after the switch. A client that stayed on it until
//!   refused could take a lock there that another client already holds on the new master.
//! - **Locks across the failover.** Right after the switch the watchdog and the fixed-lease
//!   check look for every held lock on the new master: a lock the replica had stays held and
//!   is renewed there; a lock it never got resolves [`lost`](crate::LockGuard::lost) at once
//!   (as [`Released`](crate::LostReason::Released): the key is simply not there), and
//!   unlocking it is an error that leaves whoever took it since alone. Use
//!   [replica sync](#replica-sync) so that locks are on a replica before `lock()` returns.
//! - **Credentials.** The sentinel URLs' user, password, database number and TLS scheme
//!   serve the master too; [`ClientBuilder::master_credentials`](crate::ClientBuilder::master_credentials)
//!   gives the master its own (Redisson's `password`, where the URLs' are its
//!   `sentinelPassword`). Sentinels are asked on database 0.
//! - **Pub/sub mode** does not apply: Sentinel masters use classic pub/sub.
//!
//! # Replica sync
//!
//! Redis replicates asynchronously: a master can acknowledge a lock and fail over to a replica
//! that never got it, and then a second client takes the "free" lock. Redisson's answer
//! (`checkLockSyncedSlaves`), and this crate's, is to make lock writes wait for a replica,
//! with [`ClientBuilder::replica_sync`](crate::ClientBuilder::replica_sync):
//!
//! ```rust,no_run
//! # async fn demo() -> redis_rlock::Result<()> {
//! use std::time::Duration;
//! let client = redis_rlock::Client::builder("redis://127.0.0.1:6379")
//!     .replica_sync(1, Duration::from_millis(500)) // WAIT for 1 replica, at most 500 ms
//!     .build()
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! - **What waits.** After an acquire that took the lock (a re-entry too), and after each
//!   watchdog renewal batch, the client sends `WAIT <replicas> <timeout>` on the connection
//!   that wrote. These writes use pooled connections of their own, since `WAIT` blocks its
//!   connection: a lagging replica slows only the writes that wait for it, never the connection
//!   all other lock calls share.
//! - **When a write counts.** At least one replica acknowledged it (fewer than `replicas` is
//!   accepted, as in Redisson), or no replica is connected at all (`connected_slaves` of
//!   `INFO replication`, read at most once a second and again before failing; a master without
//!   replicas has nothing to fail over to).
//! - **When it does not.** Replicas are connected and none acknowledged within the timeout. An
//!   acquire is then rolled back on the master and tried again, up to `retry_attempts` in all,
//!   and fails with [`Error::NotReplicated`](crate::Error::NotReplicated)
//!   ([`is_not_replicated`](crate::Error::is_not_replicated), also a connection error): the
//!   caller never holds a lock that only the master knows. A renewal does not count: the
//!   guard's validity is not pushed forward by it, and if no renewal is acknowledged before
//!   the validity runs out, `lost()` resolves with
//!   [`ConnectionLost`](crate::LostReason::ConnectionLost).
//! - **On a cluster**, an acquire's `WAIT` goes to the master of the lock's slot, on the
//!   node connection that wrote; a renewal round's goes to every master at once, and a
//!   master whose replicas did not acknowledge voids only the renewals of its own slots.
//!   A slot that moves between an acquire and its `WAIT` makes the `WAIT` ask the new
//!   owner, which never had the write: rare, and worth knowing.
//! - **What it does not cover.** Unlocks are not waited for (a release a failover forgets
//!   keeps the lock only until its lease runs out); nor are a fair lock's queue writes, nor a
//!   fenced `RedLock`'s token write-back. `WAIT` does not make replication synchronous: a
//!   replica that acknowledged can still lose the write if it crashes along with the master,
//!   and a replica that was not acknowledged in time may still get the write later.
//! - **Cost.** Each synced acquire takes a pooled connection (deadpool checks it with a `PING`)
//!   and one more round trip for `WAIT`, which itself lasts until a replica acknowledges (well
//!   under a millisecond on a local network). Raise
//!   [`pool_size`](crate::ClientBuilder::pool_size) for many concurrent acquires.
//!
//! For a lock that must survive any one Redis deployment failing, use a
//! [`RedLock`](crate::RedLock) over independent masters instead (see the
//! [`groups`](crate::groups) docs).
//!
//! # Memory and eviction
//!
//! A Redis that evicts keys when full frees held locks without telling anyone: with
//! `maxmemory-policy allkeys-lru` (or any `allkeys-*`, or `volatile-*`, since lock keys
//! have TTLs) a rival takes an evicted lock at once; its watchdog holder hears of it at
//! the next renewal, and a fixed-lease holder never does. So a client reads the server's
//! `maxmemory-policy` and `maxmemory` when it connects (`INFO memory`, which the README's
//! ACL rules grant; `CONFIG GET` when `INFO` is refused; on a cluster, every master), and
//! `build()` fails with [`Error::EvictingServer`](crate::Error::EvictingServer), nothing
//! written, for any policy but `noeviction` with a `maxmemory` limit, unless
//! [`ClientBuilder::allow_evicting_policy`](crate::ClientBuilder::allow_evicting_policy)
//! accepts it (logged once at `INFO`, with the policy). With `maxmemory 0` (no limit)
//! nothing is evicted and any policy is accepted (logged at `INFO`).
//!
//! A client of one Redis or of a Sentinel master checks again whenever it opens a new
//! command connection after losing one (a restart, a killed connection, a new master
//! named by the sentinels): if the server now evicts, that reconnection fails with
//! `EvictingServer`, and so does every call until the policy is fixed (each call past the
//! retry delay tries again); the client never goes on silently. What it does not see:
//! a `CONFIG SET` on a server while the connection lasts (seen at the next reconnection
//! only), and a cluster's settings after connect (a cluster connection is repaired by
//! redis-rs, never replaced), including a replica promoted later; a master that is down
//! at connect is not checked. When neither `INFO` nor `CONFIG GET` may be run, the client
//! warns once and connects.
//!
//! # Security: TLS, ACL users, secrets and hostile input
//!
//! ## TLS
//!
//! `rediss://` URLs work out of the box: the `tls` cargo feature, on by default, brings rustls
//! (with the *ring* crypto provider; no OpenSSL). Every connection of a client uses it: lock
//! calls, the pool, pub/sub. Build with `default-features = false` to leave rustls out; a
//! `rediss://` URL is then refused with [`Error::InvalidArgument`](crate::Error::InvalidArgument).
//!
//! ```rust,no_run
//! # async fn demo(ca_pem: Vec<u8>, cert_pem: Vec<u8>, key_pem: Vec<u8>) -> redis_rlock::Result<()> {
//! let client = redis_rlock::Client::builder("rediss://:secret@redis.internal:6380")
//!     .tls_root_certificate(ca_pem)                 // trust this CA instead of the system's
//!     .tls_client_certificate(cert_pem, key_pem)    // mutual TLS (tls-auth-clients yes)
//!     .build()
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! - **What a client trusts.** Without
//!   [`tls_root_certificate`](crate::ClientBuilder::tls_root_certificate), the operating
//!   system's trusted roots (read with `rustls-native-certs`); with it, only the certificates
//!   given. The server's certificate must name the host of the URL (a DNS name or an IP address
//!   in its subject alternative names). `rediss://host:port/#insecure` (redis-rs's syntax)
//!   accepts any certificate and any name: for tests only. A certificate that is not PEM is
//!   `InvalidArgument` at [`build`](crate::ClientBuilder::build); a server the roots do not
//!   vouch for fails `build()` with `invalid peer certificate: UnknownIssuer`.
//! - **Mutual TLS.** [`tls_client_certificate`](crate::ClientBuilder::tls_client_certificate)
//!   presents a certificate chain and key to a Redis with `tls-auth-clients yes`.
//!
//! ## What a client checks of the server
//!
//! At connect, before `build()` returns: the server answers as Redis
//! ([`Error::NotRedis`](crate::Error::NotRedis) otherwise, e.g. an HTTP server on the port), in
//! version 7.0 or later, as a master in standalone mode
//! ([`Error::UnsupportedServer`](crate::Error::UnsupportedServer) for a replica, a Sentinel or
//! a cluster node, which would refuse or lose lock writes), and the scripts load. Credentials
//! that are refused (`WRONGPASS`, `NOAUTH`) give an error with
//! [`is_auth_error`](crate::Error::is_auth_error), which is never retried.
//!
//! ## What is redacted
//!
//! The password of a URL (`redis://user:PASSWORD@host`, `redis://:PASSWORD@host`,
//! `?pass=PASSWORD` on a Unix socket URL) is printed as `***` everywhere the crate prints the
//! URL: `Debug` of [`Client`](crate::Client) and [`ClientBuilder`](crate::ClientBuilder),
//! error messages (a malformed URL too), and log lines. `Debug` of the builder says whether TLS
//! certificates are set, never what they are; the client key is never printed.
//!
//! ## ACL users
//!
//! The rules a lock user needs, which lock kind needs which, and what to add for a database
//! number or a user shared with Redisson are listed in the crate docs'
//! [Security section](crate#security) (the tests create their user from that very list).
//! Redisson's users need the channel as a key pattern too because Redisson's scripts declare
//! the channel as a key, where this crate's pass it as an argument. On Redis 7.2 and later,
//! redis-rs also names itself on each connection (`CLIENT SETINFO`): it goes on without it
//! when refused, but `ACL LOG` records each refusal unless the user has `+client|setinfo`.
//!
//! What happens when a rule is missing:
//!
//! - A missing **command**: the first call of each lock kind checks, with
//!   `redis.acl_check_cmd`, that the user may run every command that kind's scripts run, and
//!   fails with [`Error::PermissionDenied`](crate::Error::PermissionDenied) naming the missing
//!   ones (for example ``permission to run `+hrandfield` on key `app:1` ``), with nothing
//!   written. Redis checks a script's commands one at a time, as they run: checking them up
//!   front means no script stops half-way on a refused command. The check runs again until it
//!   passes, so a rule added on the server takes effect at once.
//! - A missing **key** pattern: Redis refuses the script before it runs, so nothing is
//!   written. The error names the key and the rule (``access to key
//!   `redisson_lock_queue:{app:7}` (`~redisson_lock_queue:*`)``); an unlock refused so leaves
//!   the lock held until its lease runs out. Other tasks' calls sent in the same batch are
//!   not affected.
//! - A missing **channel** pattern: a waiter's `lock()` or `try_lock_for()` fails at once with
//!   `PermissionDenied` naming the channel (no silent wait, and the pub/sub connection is kept,
//!   not reopened). An unlock that may not publish its message fails with `PermissionDenied`
//!   **and leaves the lock held**: every script publishes before it frees the lock, so a lock
//!   is never freed without the message its waiters wait for (it frees itself when its lease
//!   runs out).
//!
//! ## Hostile input
//!
//! Every setting has a documented range (on its [`ClientBuilder`](crate::ClientBuilder)
//! method), lock names are at most 64 KiB, leases and hold caps from 10 ms to ten years;
//! anything else is [`Error::InvalidArgument`](crate::Error::InvalidArgument) with nothing sent.
//! A lock call on a key that holds something else (a string, a hash of other data, a Redisson
//! read-write lock) fails with [`Error::NotALock`](crate::Error::NotALock) and changes nothing:
//! [`force_unlock`](crate::RLock::force_unlock) never deletes a user's data. Fencing tokens
//! stay exact over their whole range (see [fencing tokens](crate::locks#fencing-tokens)).
//! Releases work when Redis is out of memory (`maxmemory` with `noeviction`): the release
//! scripts carry Redis 7's `allow-oom` flag, since they only free memory; an acquire then
//! fails with a clear `OOM` error ([`Error::Rejected`](crate::Error::Rejected)) and writes
//! nothing.

pub(crate) mod bounded;
pub(crate) mod calls;
pub(crate) mod connections;
pub(crate) mod explain;
pub(crate) mod permissions;
pub(crate) mod pubsub;
pub(crate) mod reconnects;
pub(crate) mod replica_sync;
pub(crate) mod sentinel;
pub(crate) mod server_check;
