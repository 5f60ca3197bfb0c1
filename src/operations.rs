//! Running the locks in production: the metrics (cargo feature `metrics`), their histogram
//! buckets and alerts worth having, the traces, the ACL rules of a lock user and of the
//! inspector, deploys, and what to do when a lock is stuck. No code lives here.
//!
//! # Metrics
//!
//! With the feature `metrics`, the crate reports through the
//! [`metrics`](https://docs.rs/metrics/0.24) facade, version 0.24: install any exporter once
//! at start-up (`metrics-exporter-prometheus`, StatsD, ...), before the first client is
//! built, and every client of the process reports to it. Without the feature nothing is
//! emitted and the `metrics` crate is not linked. `examples/metrics.rs` serves them as
//! Prometheus text, from the Redis at `REDIS_URL` or, without it, a throwaway
//! `redis-server` it starts on a free loopback port:
//!
//! ```text
//! cargo run --features metrics --example metrics
//! curl -s http://127.0.0.1:PORT/metrics | grep rlock_
//! ```
//!
//! Labels are bounded: never a lock name or an owner. `kind` is `reentrant`, `fair`,
//! `fenced`, `read` or `write`, and for the acquire metrics also `redlock`, `multilock`,
//! `semaphore`, `expirable_semaphore` and `latch` (a wait for it to open); a `RedLock`'s or
//! `MultiLock`'s releases and holds count under its locks' kinds. Gauges count for the
//! whole process.
//!
//! The metrics of a lock also carry its `class`, a bounded grouping of lock names into
//! families, so that a dashboard can tell which family is contended or losing locks without
//! a lock name ever reaching a label. By default every lock is in the class `default`. A
//! client built with [`lock_class_by_prefix(':')`](crate::ClientBuilder::lock_class_by_prefix)
//! puts `orders:42` in `orders`; [`lock_class_with`](crate::ClientBuilder::lock_class_with)
//! takes any function of the name; [`Lock::with_class`](crate::Lock::with_class) sets one
//! handle's. A client gives at most [`max_lock_classes`](crate::ClientBuilder::max_lock_classes)
//! classes (64 by default): the handles of names past them count under `other`, and each
//! one made counts in `rlock_lock_classes_folded_total`, so a rule that turned out
//! unbounded costs a bounded number of series. A group's acquires are in its first lock's
//! class; a semaphore's or latch's, in the class of its name.
//!
//! Every counter and gauge exists from the first client on, at 0, for every label value
//! below: the first client built in the process makes them (later ones reset nothing), so
//! that Prometheus sees a process's first lost lock as an increase from 0 rather than a
//! series that appears at 1. Install the exporter before that client, or they appear at
//! their first change. A class other than `default` gets its series, at 0, when its first
//! handle is made. The histograms appear with their first sample.
//!
//! | metric | type | labels | what it counts |
//! |---|---|---|---|
//! | `rlock_acquires_total` | counter | `kind`, `outcome`, `class` | acquire calls ended: `acquired`, `timed_out` (the wait ran out, or `try_lock` found it held), `failed` (an error), `cancelled` (the future was dropped) |
//! | `rlock_acquire_wait_seconds` | histogram | `kind`, `outcome`, `class` | from the call to its end: the wait, for each outcome |
//! | `rlock_hold_seconds` | histogram | `kind`, `class` | from an owner's first acquire of a lock to its last release (re-entries included) |
//! | `rlock_releases_total` | counter | `kind`, `outcome`, `class` | releases: `freed`, `still_held` (an inner re-entry), `lost` (the lock was gone), `failed` (Redis not reached: the lock expires with its lease) |
//! | `rlock_renewals_total` | counter | `outcome` | locks the watchdog renewed: `renewed`, `not_held` (gone: reported lost) |
//! | `rlock_renewal_failures_total` | counter | | renewal calls that failed: their locks were not renewed that round |
//! | `rlock_locks_lost_total` | counter | `reason`, `class` | holds lost: `expired`, `released`, `connection_lost`, `quorum_lost`, `max_hold_reached` (see [`LostReason`](crate::LostReason)); a shutdown's releases are not counted |
//! | `rlock_held_locks` | gauge | `class` | holds of the process (one per owner and lock, however often re-entered) |
//! | `rlock_waiting_tasks` | gauge | `class` | calls waiting for a lock after a first busy try |
//! | `rlock_subscribed_channels` | gauge | | unlock channels the process listens on |
//! | `rlock_wakeups_total` | counter | `source` | waiters woken: `message` (an unlock message), `reconnect` (a subscription back after a gap in which messages were lost), `heartbeat` (a fair waiter's turn found by its heartbeat), `ttl_bound` (no message within the holder's TTL, or within a second for a lock without one: a re-check), `deadline` (no message before the caller's own deadline, such as `try_lock_for`'s: its last re-check) |
//! | `rlock_resubscriptions_total` | counter | | unlock channels subscribed again after their connection dropped or their slot moved |
//! | `rlock_replica_sync_total` | counter | `outcome` | [replica sync](crate::ClientBuilder::replica_sync) checks: `acknowledged`, `not_acknowledged` (the write did not count), `failed` |
//! | `rlock_lock_classes_folded_total` | counter | | lock handles made past `max_lock_classes`, counted under the class `other` |
//!
//! ## Histogram buckets
//!
//! `metrics-exporter-prometheus` renders a histogram as a summary (quantiles computed in
//! each process) unless it is given buckets, and quantiles of different replicas cannot be
//! added up. Give both histograms buckets, in seconds:
//!
//! | histogram | buckets | why |
//! |---|---|---|
//! | `rlock_acquire_wait_seconds` | 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60 | an uncontended acquire is one round trip (about a millisecond on a LAN), a contended one waits for the holders' critical sections; 5 (the alert below) is an edge, 30 is the default lease (a wait that long outlived a holder that died), 60 catches the rest |
//! | `rlock_hold_seconds` | 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600 | from a short critical section to an hour-long job the watchdog keeps; 30 (the default lease) is an edge, so holds the watchdog had to renew stand apart |
//!
//! Each bucket is a series per `kind`, `outcome` and `class`: 14 buckets cost 14 series
//! per set in use. With the exporter (as `examples/metrics.rs` does):
//!
//! ```text
//! PrometheusBuilder::new()
//!     .set_buckets_for_metric(
//!         Matcher::Full("rlock_acquire_wait_seconds".into()),
//!         &[0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0],
//!     )?
//!     .set_buckets_for_metric(
//!         Matcher::Full("rlock_hold_seconds".into()),
//!         &[0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0],
//!     )?
//!     .install()?;
//! ```
//!
//! ## What to watch
//!
//! `rlock_locks_lost_total` should stay flat (any increase is a holder that went on without
//! its lock unless it checked `lost()`); `rlock_renewal_failures_total` rising means Redis is
//! unreachable or slow for the watchdog; `ttl_bound` wake-ups growing while `message` ones
//! stay few mean unlock messages are not arriving (an ACL without the channel, a proxy that
//! drops pub/sub). `deadline` wake-ups are callers giving up on a busy lock, as
//! `try_lock_for` does, and many of them are normal under contention (the example makes about
//! one for every three messages and no `ttl_bound` one), and a `RedLock`'s or `MultiLock`'s
//! wait counts its deadline the same way. A wait p99 near the lease means the lock is
//! contended beyond what its holders' work allows. The alert rules below watch for each of
//! these.
//!
//! ## Alert rules and a dashboard
//!
//! `examples/monitoring/` holds them, ready to load. `rlock.rules.yml` has Prometheus
//! alerting rules for what someone on call must act on: add the file to `rule_files` in
//! `prometheus.yml` (it assumes the buckets above, and one scrape target per process, whose
//! `job` and `instance` the alerts carry); `rlock.rules.test.yml` tests each alert with
//! `promtool test rules`. `grafana-dashboard.json` is a Grafana dashboard (Grafana 9 or
//! later: Dashboards, New, Import, then pick the Prometheus data source) with a panel for
//! each metric and filters on `job`, `instance` and `kind`. CI checks the rules with
//! `promtool`, and `tests/metrics/` checks that every metric, label and label value the
//! three files use is one the metrics example serves. Each alert's `runbook_url` leads to
//! its section here.
//!
//! ### LockLost
//!
//! A hold ended without its owner's release: until the owner saw `lost()`, it worked
//! without the lock. The `lock lost` warning names the lock, the owner and the `reason`:
//! `expired`, its renewals did not get through (see LockRenewalFailing) or the process
//! paused past its lease (GC, CPU starvation, SIGSTOP); `released`, someone force-unlocked
//! it (`rlock unlock`, `force_unlock`); `connection_lost`, Redis was out of reach for the
//! lease; `quorum_lost`, a `RedLock` lost its majority; `max_hold_reached`, the job ran past
//! its `with_max_hold` cap. Check that the code stops on `lost()`: only a fencing token
//! stops a write already under way.
//!
//! ### LockRenewalFailing
//!
//! The watchdog's renewal calls keep failing: Redis is out of reach, slow, or (with replica
//! sync) its replicas do not acknowledge. From the process's host, check Redis' latency
//! (`redis-cli --latency`), its `maxclients`, slow scripts (`SLOWLOG GET`), and the
//! replicas (LockReplicaSyncFailing). Once the failures last a lease, LockLost follows.
//!
//! ### LockWaitSlow
//!
//! More than 1 in 100 acquire calls of a kind wait over 5 s. `rlock list` shows the
//! holders, TTLs and fair queues; the dashboard's hold times show whether holders take
//! longer than they did. Shorten the critical sections, split a hot lock into finer ones,
//! or use a `FairLock` if some waiters starve. Waits near the lease are waiters outliving
//! holders that crashed without releasing: look for restarts.
//!
//! ### LockMessagesLost
//!
//! Waiters woke on their TTL-bounded re-checks more often than on unlock messages. Check
//! that the lock user's ACL has the unlock channels (`&redisson_lock__channel:*`: a refused
//! channel is logged as a warning), and that nothing between the process and Redis drops
//! pub/sub (some proxies and cloud gateways do); `rlock show NAME` counts a lock's
//! listeners. A `RedLock`'s or `MultiLock`'s wait counts its deadline as `ttl_bound`
//! (above): under contention on those, this alert says little.
//!
//! ### LockResubscriptionStorm
//!
//! The process's pub/sub connection keeps dropping, and each time its waiters re-check.
//! Look for Redis' `client-output-buffer-limit pubsub` closing slow subscribers (its log
//! says so), an idle `timeout`, a load balancer's idle timeout, or repeated failovers or
//! slot migrations; the client's INFO lines on channels subscribed again give the times.
//!
//! ### LockReplicaSyncFailing
//!
//! [Replica sync](crate::ClientBuilder::replica_sync) keeps finding no replica that
//! acknowledged a lock write in time (or `WAIT` fails): those acquires and renewals are
//! refused. `INFO replication` on the master shows the replicas connected and their lag:
//! fix or add replicas, or give the wait more time if they are healthy but slow.
//!
//! ### LockHeldStuck
//!
//! A process has held locks for an hour and released none: a job stuck in its critical
//! section, or a guard kept alive by mistake (in a long-lived struct, a leaked task) that
//! the watchdog renews forever. Find its locks with `rlock list` (holders carry the client
//! id the process logs when it connects) and see [When a lock is stuck](#when-a-lock-is-stuck);
//! `with_max_hold` caps how long a hold can last.
//!
//! ### LockWaitersStuck
//!
//! Calls of a process have waited 15 minutes while it acquired nothing: the lock they want
//! is held all that time, by a live holder (another service, a Redisson client) or with no
//! TTL at all. `rlock list` and `rlock leaks` find it; see
//! [When a lock is stuck](#when-a-lock-is-stuck).
//!
//! # Traces
//!
//! Spans, at `DEBUG`, with these fields only:
//!
//! | span | fields | covers |
//! |---|---|---|
//! | `acquire` | `lock`, `kind`, `wait`, `fixed_lease_ms` | an acquire call and its whole wait (a `RedLock`'s or `MultiLock`'s: `lock` is its first lock's name) |
//! | `unlock` | `lock`, `kind` (a group's: `lock`, `nodes`) | a guard's release, to the end, in the background too if the caller left |
//! | `renewal_round` | `locks` | one watchdog round over every watchdog lock of a client |
//!
//! `WARN` is kept for what an operator must act on: a lock lost (`lock lost`, with the lock,
//! the owner and the reason), a renewal that failed or found no connection, a fair queue's
//! heartbeat that cannot reach Redis, lock writes no replica acknowledged, unlock channels
//! that cannot be subscribed again (once per outage: waiters fall back to their TTL-bounded
//! re-checks), an ACL that forbids an unlock channel, a release or an undo that could not be
//! sent (that lock expires with its lease), what a shutdown could not release, and Sentinel
//! trouble. `INFO` says when a client connects, starts and ends a shutdown (`shutting down`,
//! `shut down` with what it released), and when unlock channels are subscribed again;
//! everything else is `DEBUG` or `TRACE`. Passwords never
//! appear in any of them.
//!
//! # ACL rules
//!
//! The README's "Security" section shows the rules of a lock user (Redis 7.0), with its own
//! lock names in the first key pattern. What each rule is for, and what each kind adds:
//!
//! | rule | for |
//! |---|---|
//! | `~<your lock names>` | the lock hashes (with a `key_prefix`, the prefixed names); `client.fenced_set` needs its resource keys too |
//! | `~redisson_unlock_latch:*` | on a Redis Cluster or through Sentinel, every semaphore and latch count change (its request latch); Redisson's unlocks (a user shared with Java services). This crate's unlocks write no latch: a retry knows its earlier try by the owner's count (see `locks::release`) |
//! | `~redisson_lock_queue:*`, `~redisson_lock_timeout:*` | `FairLock` only |
//! | `~redisson_lock_token:*` | `FencedLock` only; `~redis_rlock_fence:*` for `client.fenced_set` |
//! | `&redisson_lock__channel:*` | publishing and hearing unlock messages (a fair lock's waiters have channels of their own under it) |
//! | `+evalsha` … `+unsubscribe` | every lock: the scripts and what they run, the pub/sub connections (RESP3: `HELLO`, `SUBSCRIBE`, `PING`), deadpool's health check (`UNWATCH`, `PING`) and the connect check (`HELLO`) |
//! | `+hset` … `+time` | `FairLock` only |
//! | `+incr` | `FencedLock` only |
//! | `+info` | every client, at connect and on reconnection: the `maxmemory-policy` check (without it the client tries `CONFIG GET`, which the ACL log records as refused, then warns) |
//! | `+wait` | `replica_sync` only |
//! | `~redis_rlock_wait*` | the [wait registry](crate::ClientBuilder::wait_registry) only (its failures are logged, one `WARN` per process for a refusal, and never fail a lock call) |
//!
//! A `ReadWriteLock` adds `~{<your lock names>` (its read holds' timeout keys,
//! `{<name>}:<owner>:rwlock_timeout:<n>`), `&redisson_rwlock:*` and `+hdel +hgetall +hlen`; the
//! semaphores and the latch add `~{<their names>}:timeout`, `&redisson_sc:*`,
//! `&redisson_countdownlatch__channel__*` and `+incrby +decrby +decr +zrange +zcard`.
//! Add `+select` for a URL with a database number, and `~redisson_lock__channel:*` for a user
//! that Java services running Redisson share. On a Redis Cluster add `+cluster|slots +cluster|info`, and for
//! sharded pub/sub (the default there) `+spublish +ssubscribe +sunsubscribe
//! +pubsub|shardnumsub`. A missing rule gives a `PermissionDenied` error
//! naming it, with nothing half-done in Redis. The `transport` module docs cover what a client
//! trusts, what it checks of the server at connect, and what each missing rule does.
//!
//! ## The inspector's rules
//!
//! The README's "Operations" section shows the read-only rules of `rlock`'s user (`ACL
//! SETUSER inspector`), with its lock names in the key patterns. What each is for:
//!
//! | rule | for |
//! |---|---|
//! | `~<your lock names>` | the lock hashes, and the semaphores' and latches' numbers |
//! | `~{<your lock names>` | expirable semaphores' taken permits (`{<name>}:timeout`) |
//! | `~redisson_*` | fair queues and deadlines, fencing counters, unlock latches (Redisson's, and a cluster or Sentinel client's synchronizer request latches) |
//! | `+scan` | finding keys, page by page on every master (never `KEYS`) |
//! | `+type +pttl +hscan +llen +zcard +zcount +get` | reading each lock: its type, lease, holders (one bounded `HSCAN`), queue, stale waiters, fencing counter |
//! | `+zmscore +lrange +zrange` | `show`: the fair queue with deadlines, expirable permits |
//! | `+time` | the server clock that deadlines are read against |
//! | `~redis_rlock_wait* +zrangebyscore +hmget` | the wait registry: `show`'s registered waiters, `deadlocks` |
//! | `+pubsub\|numsub +pubsub\|channels` | who listens on a lock's channels; semaphores and latches with waiters |
//! | `+info` | the check that a one-server URL is not a cluster node |
//!
//! On a Redis Cluster add `+cluster|slots` (every master is read), and `+pubsub|shardnumsub
//! +pubsub|shardchannels` for sharded subscribers (without them, those count as none); on
//! Sentinel, `+sentinel|get-master-addr-by-name` for its user on the sentinels. `rlock
//! unlock` reads the lock first (these rules), then frees it through the library's client:
//! add the lock user's rules (README, "Security"), with the additions above for the kinds
//! it frees. A refused command is named as the library names one, with the rule to grant
//! ("Redis refused reading `host:port`: the user lacks permission to run `+scan`", exit code
//! 4); a key outside the patterns (`SCAN` lists every key, whatever the user may read) is
//! named too: narrow the walk with `--pattern`.
//!
//! # Who waits for whom
//!
//! Redis shows who holds a lock, never who waits for one: an `RLock`'s waiters only
//! subscribe to its channel. So a deadlock across services (task A holds `x` and waits for
//! `y`, task B holds `y` and waits for `x`) looks like two locks held for a long time. With
//! [`ClientBuilder::wait_registry`](crate::ClientBuilder::wait_registry) on, every waiting
//! lock call records itself (owner field, since when, [`client_name`](crate::ClientBuilder::client_name))
//! beside the lock and under its owner, refreshed while it waits, removed when the wait
//! ends, expired within one watchdog timeout after a crash (layout:
//! [`layout::Derived::Waiters`](crate::protocol::layout::Derived::Waiters) and
//! [`layout::waiting_record`](crate::protocol::layout::waiting_record)). A group's waiting
//! call is recorded under its one owner field: a `RedLock`'s on every master, a
//! `MultiLock`'s beside each of its locks held elsewhere (an owner has one record per
//! Redis, so a `MultiLock` waiting for two locks of one Redis is recorded under its owner as
//! waiting for the one it found held last). Then:
//!
//! - `rlock show NAME` lists the lock's registered waiters, longest waiting first;
//! - `rlock deadlocks` walks the holds and the registered waits on every master and prints
//!   each cycle, with the fix; its exit code is 1 when it found one:
//!
//! ```text
//! $ rlock deadlocks
//! deadlock 1: 2 tasks, each waiting for a lock the next one holds
//!   TASK                                    CLIENT  WAITS FOR  HELD BY                                 WAITING  NODE
//!   161627f6-17de-4871-ba58-ab7964e688ff:3  svc-a   y          67fdd9df-d618-444e-bc49-eab3903c88c8:3  4m 12s   127.0.0.1:6379
//!   67fdd9df-d618-444e-bc49-eab3903c88c8:3  svc-b   x          161627f6-17de-4871-ba58-ab7964e688ff:3  4m 13s   127.0.0.1:6379
//!   fix: free `x`, held by the task whose wait began last (its client reports the lock lost), or stop one of these tasks:
//!     rlock --url redis://127.0.0.1:6379 unlock --yes -- x
//! ```
//!
//! - and the client itself logs one `WARN` when a wait lasts longer than
//!   [`long_wait_warning`](crate::ClientBuilder::long_wait_warning) (60 s by default):
//!   `still waiting for a lock`, with the lock, how long, its holders and, when the holders
//!   wait in turn in a cycle, the cycle (`deadlock=…`).
//!
//! A wait with a deadline (`try_lock_for`) ends a deadlock by itself; `lock()` does not.
//! Redisson clients neither write nor read the registry, so a cycle through a Java thread
//! is not seen; a [`RedLock`](crate::RedLock) or [`MultiLock`](crate::MultiLock) wait is not
//! recorded either. What it costs Redis is in BENCHMARKS.md.
//!
//! # Deploys
//!
//! A process that exits without [`Client::shutdown`](crate::Client::shutdown) leaves each
//! lock it held until its lease runs out (30 s with the default watchdog timeout): a
//! rolling deploy of N workers would stall the others that long per lock. Stop processes
//! with SIGTERM, and have them call `shutdown` on it (see `examples/worker.rs` and
//! `examples/job_consumer.rs`): their locks, permits and fair-queue places are released
//! before they exit, and the waiters elsewhere get in at once.
//!
//! # When a lock is stuck
//!
//! `rlock`, the inspector in this repository (`cargo run --bin rlock -- --help`), reads the
//! layout this crate and Redisson share, on one Redis, a cluster or a Sentinel master (tables,
//! or `--json`; exit codes for scripts). `rlock list` shows every lock (kind, TTL, fair queue,
//! fencing token, holders), the expirable semaphores, and any semaphore or latch with
//! waiters; `rlock watch` refreshes every second. It walks the keyspace a `SCAN` page at a
//! time, reading each page before the next, so its memory stays bounded on a keyspace of
//! millions of keys; keys that are not UTF-8 are read as bytes and shown with `\xHH`, and
//! control characters in names are printed escaped. A session:
//!
//! ```text
//! $ rlock list
//! NAME          KIND       TTL     QUEUE        TOKEN  NODE            HOLDERS
//! jobs          fair       25.7s   2 (1 stale)  -      127.0.0.1:7399  9a0e7c55-1b2d-4f3e-8c6a-7d9e0f1a2b3c:12 ×1
//! ledger        fenced     4.8s    -            118    127.0.0.1:7399  9a0e7c55-1b2d-4f3e-8c6a-7d9e0f1a2b3c:31 ×1
//! orders:42     reentrant  24.2s   -            -      127.0.0.1:7399  4f1c2b9e-6d0a-4c6e-9a51-2b7f0d3c8e11:57 ×2
//! report:daily  reentrant  no TTL  -            -      127.0.0.1:7399  c3d2e1f0-aaaa-4bbb-8ccc-ddddeeeeffff:9 ×1
//! $ rlock leaks
//! report:daily [no_ttl] on 127.0.0.1:7399
//!   key:  report:daily
//!   what: held by c3d2e1f0-aaaa-4bbb-8ccc-ddddeeeeffff:9 with no TTL: it never expires, and a crashed holder keeps it forever
//!   fix:  rlock --url redis://127.0.0.1:7399 unlock --yes -- report:daily
//! ```
//!
//! To free a stuck lock:
//!
//! 1. `rlock show NAME`: who holds it (client id and task or thread id, re-entry count), its
//!    TTL, the fair queue with each waiter's deadline on the server clock, and how many
//!    clients listen on its channels (for a semaphore: its permits, for a latch: its count,
//!    and who waits). A holder's client id is its `Client::id` (or Redisson's
//!    client id), which this crate logs at INFO when the client connects (`connected`, with
//!    `client` and the redacted `url`).
//! 2. A TTL counting down with a live holder: the holder is working (or its watchdog renews a
//!    lock it forgot to release: look for a guard kept alive). A lock with no TTL was written
//!    by something else: `rlock leaks` lists those, fair queues whose waiters are all past
//!    their deadline, and stale unlock latches, each with the command that fixes it.
//! 3. `rlock unlock NAME` force-unlocks through the kind's own script, so that waiters are
//!    woken, and frees only the holders it showed (exit code 5 when they changed meanwhile;
//!    `--any-holder` frees whoever holds it); the old holder learns it at its next renewal
//!    (`lost()` resolves with [`Released`](crate::LostReason::Released)).
