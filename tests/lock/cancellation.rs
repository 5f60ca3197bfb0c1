//! Cancellation: a lock call whose future is dropped (a `timeout` around it, a `select!`,
//! an aborted task) leaves nothing behind. Once the call is dropped its client keeps no
//! subscription and no place in a fair lock's queue for it; and soon after, far sooner than
//! any lease, Redis holds nothing for it either: no field in the lock's hash (not even one
//! a script still in flight took after the caller left), no place in the queue, no
//! subscriber; the lock is free for the next caller as soon as its holder lets go.
//!
//! # The matrix
//!
//! One test per lock kind, cancel point and server state (`kind::point::redis_state`);
//! each cancels every entry point in turn, on a lock of its own. The entry points are
//! `lock`, `lock_with_lease`, `try_lock_for` and `try_lock_with` (and `try_lock`, where a
//! call that does not wait can be cancelled at all: in its script call), of a single lock
//! and of a group. The kinds are `RLock`, `FairLock`, `FencedLock`, `RedLock` (three
//! masters) and `MultiLock` (two).
//!
//! | cancel point | how the test holds the call there | kinds |
//! |---|---|---|
//! | `in_the_first_script_call` | the lock is free; `CLIENT PAUSE WRITE` holds the script in Redis | all |
//! | `after_taking_some_masters` | writes paused on all masters but the first, which granted the lock | groups |
//! | `while_subscribing` | a rival holds the lock; `maxclients` refuses the pub/sub connection | all |
//! | `in_the_script_call_after_subscribing` | as above, then writes paused and connections let in: the retry after the subscription (a fair lock's joins the queue) is held | all |
//! | `while_waiting` | a rival holds the lock; the call is subscribed (and queued) | all |
//!
//! The server state is `redis_up`, or `redis_frozen`: every master is frozen (SIGSTOP:
//! connections stay open and nothing is answered, as a hung server or a partition) from the
//! cancel point until the commands in flight have timed out, then thawed. Writes paused and
//! connections refused are undone once the call is cancelled (after the thaw).
//!
//! Further down: the cancel point swept in time (a call cancelled after 0, 1, 2, ... tens
//! of microseconds, while a rival lets go), acquires abandoned inside a batch, and what a
//! cancelled fair waiter hands on to the waiter behind it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use redis::aio::MultiplexedConnection;
use redis_rlock::{Client, FairLock, FencedLock, GroupGuard, LockGuard, MultiLock, RLock, RedLock};
use testkit::fair::{fair_clients, queue_holder, queue_len};
use testkit::{
    client, eventually, fair_deadline, fair_queue, info_number, key_exists, lock_hash,
    queue_becomes, settles_to, RedisServer,
};
use tokio::sync::Barrier;

const GENEROUS: Duration = Duration::from_secs(5);
/// Long enough that no heartbeat runs during a test: what happens is the scripts' doing.
const NO_HEARTBEAT: Duration = Duration::from_secs(120);

// ---------------------------------------------------------------------------------------
// The matrix
// ---------------------------------------------------------------------------------------

/// The lease and the wait of the entry points that take one: far longer than any test, so
/// that nothing left behind can expire or give up while the test looks.
const LEASE: Duration = Duration::from_secs(60);
const WAIT: Duration = Duration::from_secs(60);
/// How long what a cancel left may take to be cleaned up. Far below the leases (30 s
/// under the watchdog, [`LEASE`]) and the fair waiter timeout ([`NO_HEARTBEAT`]): only
/// the library's cleanup explains a clean Redis this soon.
const SETTLE: Duration = Duration::from_secs(5);
/// Per-node timeout of the groups: the test holds a node's script (paused writes) for
/// well under it.
const NODE_TIMEOUT: Duration = Duration::from_secs(3);

/// Named after the library's types.
#[allow(clippy::enum_variant_names)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    RLock,
    FairLock,
    FencedLock,
    RedLock,
    MultiLock,
}

impl Kind {
    fn masters(self) -> usize {
        match self {
            Kind::RedLock => 3,
            Kind::MultiLock => 2,
            _ => 1,
        }
    }

    /// How many masters answer busy before a group gives a round up, so subscribe.
    fn busy_masters(self) -> usize {
        match self {
            // Quorum 2 of 3: a second busy master decides the round.
            Kind::RedLock => 2,
            _ => 1,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entry {
    Lock,
    LockWithLease,
    TryLock,
    TryLockFor,
    TryLockWith,
}

/// The entry points a call cancelled in its first script call can have come through.
const EVERY_ENTRY: [Entry; 5] = [
    Entry::Lock,
    Entry::LockWithLease,
    Entry::TryLock,
    Entry::TryLockFor,
    Entry::TryLockWith,
];
/// The entry points that wait, so subscribe.
const WAITING_ENTRIES: [Entry; 4] = [
    Entry::Lock,
    Entry::LockWithLease,
    Entry::TryLockFor,
    Entry::TryLockWith,
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Point {
    FirstScript,
    SomeMastersTaken,
    Subscribing,
    ScriptAfterSubscribing,
    Waiting,
}

impl Point {
    fn entries(self) -> &'static [Entry] {
        match self {
            Point::FirstScript | Point::SomeMastersTaken => &EVERY_ENTRY,
            _ => &WAITING_ENTRIES,
        }
    }

    /// Whether a rival holds the lock, so that the call goes on to subscribe.
    fn rival_holds(self) -> bool {
        matches!(
            self,
            Point::Subscribing | Point::ScriptAfterSubscribing | Point::Waiting
        )
    }

    /// Whether new connections are refused (`maxclients`) to hold the subscription back.
    fn refuses_connections(self) -> bool {
        matches!(self, Point::Subscribing | Point::ScriptAfterSubscribing)
    }

    /// Whether a script of the call is in flight at the cancel.
    fn script_in_flight(self) -> bool {
        matches!(
            self,
            Point::FirstScript | Point::SomeMastersTaken | Point::ScriptAfterSubscribing
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Redis {
    Up,
    Frozen,
}

impl Redis {
    /// The waiter's response timeout. Up: longer than any test holds a script. Frozen: short
    /// enough to run out while frozen, and, where a script is in flight from before the
    /// freeze, long enough for the test to freeze Redis and cancel first.
    fn response_timeout(self, point: Point) -> Duration {
        match (self, point.script_in_flight()) {
            (Redis::Up, _) => Duration::from_secs(5),
            (Redis::Frozen, true) => Duration::from_millis(1_000),
            (Redis::Frozen, false) => Duration::from_millis(400),
        }
    }

    /// How long the masters stay frozen after the cancel: past the response timeout, so
    /// that what was in flight times out (there is no event to await: it happens inside
    /// the library).
    fn frozen_for(self, point: Point) -> Duration {
        self.response_timeout(point) + Duration::from_millis(300)
    }
}

/// A lock of any kind behind one type.
#[derive(Clone)]
enum AnyLock {
    R(RLock),
    Fair(FairLock),
    Fenced(FencedLock),
    Red(RedLock),
    Multi(MultiLock),
}

/// The guard of any kind of lock.
enum Held {
    One(LockGuard),
    Group(GroupGuard),
}

impl From<LockGuard> for Held {
    fn from(guard: LockGuard) -> Self {
        Held::One(guard)
    }
}

impl From<GroupGuard> for Held {
    fn from(guard: GroupGuard) -> Self {
        Held::Group(guard)
    }
}

impl Held {
    async fn unlock(self) -> redis_rlock::Result<()> {
        match self {
            Held::One(guard) => guard.unlock().await,
            Held::Group(guard) => guard.unlock().await,
        }
    }
}

/// `$body` with `$lock` bound to the lock inside any [`AnyLock`].
macro_rules! each {
    ($any:expr, $lock:ident => $body:expr) => {
        match $any {
            AnyLock::R($lock) => $body,
            AnyLock::Fair($lock) => $body,
            AnyLock::Fenced($lock) => $body,
            AnyLock::Red($lock) => $body,
            AnyLock::Multi($lock) => $body,
        }
    };
}

impl AnyLock {
    /// The lock `name` of `kind`, on one client per master.
    fn new(kind: Kind, clients: &[Client], name: &str) -> AnyLock {
        match kind {
            Kind::RLock => AnyLock::R(clients[0].lock(name)),
            Kind::FairLock => AnyLock::Fair(clients[0].fair_lock(name)),
            Kind::FencedLock => AnyLock::Fenced(clients[0].fenced_lock(name)),
            Kind::RedLock => AnyLock::Red(
                RedLock::new(clients.iter().map(|c| c.lock(name)).collect())
                    .with_node_timeout(NODE_TIMEOUT),
            ),
            Kind::MultiLock => AnyLock::Multi(
                MultiLock::new(clients.iter().map(|c| c.lock(name)).collect())
                    .with_node_timeout(NODE_TIMEOUT),
            ),
        }
    }

    /// Calls `entry`; `Some` with the guard when it took the lock.
    async fn call(&self, entry: Entry) -> redis_rlock::Result<Option<Held>> {
        match entry {
            Entry::Lock => each!(self, l => l.lock().await.map(|g| Some(g.into()))),
            Entry::LockWithLease => {
                each!(self, l => l.lock_with_lease(LEASE).await.map(|g| Some(g.into())))
            }
            Entry::TryLock => each!(self, l => l.try_lock().await.map(|g| g.map(Held::from))),
            Entry::TryLockFor => {
                each!(self, l => l.try_lock_for(WAIT).await.map(|g| g.map(Held::from)))
            }
            Entry::TryLockWith => {
                each!(self, l => l.try_lock_with(WAIT, LEASE).await.map(|g| g.map(Held::from)))
            }
        }
    }

    /// Takes the lock at once, which must be free, and lets it go.
    async fn take_and_release(&self, what: &str) {
        let guard = self
            .call(Entry::TryLock)
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"))
            .unwrap_or_else(|| panic!("{what}: the lock is not free"));
        guard.unlock().await.unwrap();
    }
}

/// The servers of one matrix test, and a raw connection to each, opened before any
/// connection is refused.
struct Scene {
    kind: Kind,
    redis: Redis,
    servers: Vec<RedisServer>,
    raw: Vec<MultiplexedConnection>,
}

impl Scene {
    async fn start(kind: Kind, redis: Redis) -> Scene {
        Scene::with_masters(kind, redis, kind.masters()).await
    }

    async fn with_masters(kind: Kind, redis: Redis, masters: usize) -> Scene {
        let servers: Vec<RedisServer> = (0..masters).map(|_| RedisServer::start()).collect();
        let mut raw = Vec::new();
        for server in &servers {
            raw.push(server.raw().await);
        }
        Scene {
            kind,
            redis,
            servers,
            raw,
        }
    }

    /// One client per master, that has already taken and released a lock of the kind (so
    /// that its connections are open and its first-use checks done) and never waited (so
    /// that it has no pub/sub connection yet).
    async fn clients(&self, response_timeout: Duration) -> Vec<Client> {
        let mut clients = Vec::new();
        for server in &self.servers {
            let client = Client::builder(server.url())
                .response_timeout(response_timeout)
                .retry_delay(Duration::from_millis(20))
                .subscribe_timeout(Duration::from_secs(10))
                .fair_waiter_timeout(NO_HEARTBEAT)
                .build()
                .await
                .unwrap();
            clients.push(client);
        }
        AnyLock::new(self.kind, &clients, "warm-up")
            .take_and_release("warming up")
            .await;
        // The warm-up's unlock latch stays until 512 have gathered, an unlock a second later,
        // or the client's end: no UNLINK goes out on a timer while a test has Redis paused.
        clients
    }

    /// Cancels a call of `entry` at `point` and checks that it left nothing behind.
    async fn cancel(&self, point: Point, entry: Entry) {
        let what = format!(
            "{:?}, {entry:?} cancelled at {point:?}, Redis {:?}",
            self.kind, self.redis
        );
        let name = format!("{point:?}-{entry:?}");
        if point.refuses_connections() {
            // What is connected must stay so until the cancel: earlier clients are gone.
            for raw in &self.raw {
                kill_other_connections(raw).await;
            }
        }
        let rival = AnyLock::new(
            self.kind,
            &self.clients(Redis::Up.response_timeout(point)).await,
            &name,
        );
        let waiters = self.clients(self.redis.response_timeout(point)).await;
        let lock = AnyLock::new(self.kind, &waiters, &name);
        let held = if point.rival_holds() {
            Some(rival.call(Entry::Lock).await.unwrap().unwrap())
        } else {
            None
        };
        let refused_before = if point.refuses_connections() {
            Some(self.refuse_new_connections().await)
        } else {
            None
        };
        match point {
            Point::FirstScript => self.pause_writes(0..self.servers.len()).await,
            Point::SomeMastersTaken => self.pause_writes(1..self.servers.len()).await,
            _ => {}
        }

        let call = tokio::spawn({
            let lock = lock.clone();
            async move { lock.call(entry).await }
        });
        let owner = format!("{}:{}", waiters[0].id(), call.id());
        match point {
            Point::FirstScript => self.scripts_held(&what, 0..self.servers.len()).await,
            Point::SomeMastersTaken => {
                let granted = settles_to(true, GENEROUS, || {
                    let mut raw = self.raw[0].clone();
                    let (name, owner) = (name.clone(), owner.clone());
                    async move { lock_hash(&mut raw, &name).await.contains_key(&owner) }
                })
                .await;
                assert!(granted, "{what}: the first master never granted the lock");
                self.scripts_held(&what, 1..self.servers.len()).await;
            }
            Point::Subscribing => self.connection_refused(&what, &refused_before).await,
            Point::ScriptAfterSubscribing => {
                self.connection_refused(&what, &refused_before).await;
                self.pause_writes(0..self.servers.len()).await;
                self.accept_connections().await;
                self.subscribed(&what, &waiters).await;
                self.scripts_held(&what, 0..self.servers.len()).await;
            }
            Point::Waiting => {
                self.subscribed(&what, &waiters).await;
                if self.kind == Kind::FairLock {
                    let queued = settles_to(true, GENEROUS, || {
                        let mut raw = self.raw[0].clone();
                        let (name, owner) = (name.clone(), owner.clone());
                        async move { fair_queue(&mut raw, &name).await.contains(&owner) }
                    })
                    .await;
                    assert!(queued, "{what}: the waiter never joined the queue");
                }
            }
        }

        if self.redis == Redis::Frozen {
            self.servers.iter().for_each(RedisServer::freeze);
        }
        call.abort();
        match tokio::time::timeout(GENEROUS, call).await {
            Ok(Err(e)) if e.is_cancelled() => {}
            Ok(Err(e)) => panic!("{what}: the call panicked: {e}"),
            Ok(Ok(outcome)) => panic!(
                "{what}: the call ended before it was cancelled, taking the lock: {:?}",
                outcome.map(|held| held.is_some())
            ),
            Err(_) => panic!("{what}: an aborted call did not end within {GENEROUS:?}"),
        }
        // Dropped, the call let go of its subscription and its place at once.
        for client in &waiters {
            assert_eq!(client.status().subscribed_channels, 0, "{what}: subscribed");
            assert_eq!(client.status().queued_waiters, 0, "{what}: queued");
        }
        if self.redis == Redis::Frozen {
            tokio::time::sleep(self.redis.frozen_for(point)).await;
            self.servers.iter().for_each(RedisServer::thaw);
        }
        if point.script_in_flight() {
            for raw in &self.raw {
                let _: () = redis::cmd("CLIENT")
                    .arg("UNPAUSE")
                    .query_async(&mut raw.clone())
                    .await
                    .unwrap();
            }
        }
        if point == Point::Subscribing {
            self.accept_connections().await;
        }

        // Whatever was in flight has been answered or has timed out by now; what it took
        // is taken back in the background.
        eventually(&format!("{what}: no hold tracked"), SETTLE, || {
            waiters.iter().all(|c| c.status().held_locks == 0)
        })
        .await;
        let left = settles_to(Vec::new(), SETTLE, || self.left_for(&name, &owner)).await;
        assert!(left.is_empty(), "{what}: left behind: {left:?}");
        if let Some(held) = held {
            held.unlock().await.unwrap();
        }
        let left = settles_to(Vec::new(), SETTLE, || self.keys_of(&name)).await;
        assert!(
            left.is_empty(),
            "{what}: still there after the holder let go: {left:?}"
        );
        rival
            .take_and_release(&format!("{what}: the next caller"))
            .await;
    }

    /// Pauses writes (scripts included) on the masters in `range`.
    async fn pause_writes(&self, range: std::ops::Range<usize>) {
        for raw in &self.raw[range] {
            let _: () = redis::cmd("CLIENT")
                .arg("PAUSE")
                .arg(30_000)
                .arg("WRITE")
                .query_async(&mut raw.clone())
                .await
                .unwrap();
        }
    }

    /// Waits until every master in `range` holds a script back (a client blocked in
    /// `EVALSHA`).
    async fn scripts_held(&self, what: &str, range: std::ops::Range<usize>) {
        for (index, raw) in self.raw[range].iter().enumerate() {
            let held = settles_to(true, GENEROUS, || async {
                let list: String = redis::cmd("CLIENT")
                    .arg("LIST")
                    .query_async(&mut raw.clone())
                    .await
                    .unwrap();
                list.lines().any(|line| {
                    let field = |name: &str| {
                        line.split(' ')
                            .find_map(|part| part.strip_prefix(name)?.strip_prefix('='))
                            .unwrap_or_default()
                    };
                    field("flags").contains('b') && field("cmd") == "evalsha"
                })
            })
            .await;
            assert!(held, "{what}: no script reached master {index}");
        }
    }

    /// Sets every master's `maxclients` to what is connected now, so that the next
    /// connection is refused; returns how many each had refused so far.
    async fn refuse_new_connections(&self) -> Vec<i64> {
        let mut refused = Vec::new();
        for raw in &self.raw {
            let mut raw = raw.clone();
            let connected = info_number(&mut raw, "clients", "connected_clients").await;
            let _: () = redis::cmd("CONFIG")
                .arg("SET")
                .arg("maxclients")
                .arg(connected)
                .query_async(&mut raw)
                .await
                .unwrap();
            refused.push(info_number(&mut raw, "stats", "rejected_connections").await);
        }
        refused
    }

    async fn accept_connections(&self) {
        for raw in &self.raw {
            let _: () = redis::cmd("CONFIG")
                .arg("SET")
                .arg("maxclients")
                .arg(10_000)
                .query_async(&mut raw.clone())
                .await
                .unwrap();
        }
    }

    /// Waits until a master refused a connection since `before`: the call's pub/sub
    /// connection, so the call is subscribing.
    async fn connection_refused(&self, what: &str, before: &Option<Vec<i64>>) {
        let before = before.as_ref().expect("connections refused");
        let refused = settles_to(true, GENEROUS, || async {
            for (raw, before) in self.raw.iter().zip(before) {
                let now = info_number(&mut raw.clone(), "stats", "rejected_connections").await;
                if now > *before {
                    return true;
                }
            }
            false
        })
        .await;
        assert!(refused, "{what}: no pub/sub connection was attempted");
    }

    /// Waits until the call's subscriptions are confirmed: on as many masters as answered
    /// it busy.
    async fn subscribed(&self, what: &str, waiters: &[Client]) {
        let needed = self.kind.busy_masters();
        let count = || {
            waiters
                .iter()
                .filter(|c| c.status().subscribed_channels == 1)
                .count()
        };
        let subscribed = settles_to(true, GENEROUS, || async { count() >= needed }).await;
        assert!(subscribed, "{what}: subscribed on {} masters", count());
    }

    /// What Redis still keeps for `owner` on lock `name`, on any master: a field in the
    /// hash, a place or a deadline in the queue, a subscriber on an unlock channel.
    async fn left_for(&self, name: &str, owner: &str) -> Vec<String> {
        let mut left = Vec::new();
        for (index, raw) in self.raw.iter().enumerate() {
            let mut raw = raw.clone();
            if lock_hash(&mut raw, name).await.contains_key(owner) {
                left.push(format!("master {index}: a field in the hash"));
            }
            if fair_queue(&mut raw, name).await.iter().any(|o| o == owner) {
                left.push(format!("master {index}: a place in the queue"));
            }
            if fair_deadline(&mut raw, name, owner).await.is_some() {
                left.push(format!("master {index}: a deadline in the queue"));
            }
            let channels: Vec<String> = redis::cmd("PUBSUB")
                .arg("CHANNELS")
                .arg(format!("redisson_lock__channel:{{{name}}}*"))
                .query_async(&mut raw)
                .await
                .unwrap();
            for channel in channels {
                left.push(format!("master {index}: a subscriber on {channel}"));
            }
        }
        left
    }

    /// The keys of lock `name` still in Redis (its hash and, for a fair lock, its queue),
    /// on any master.
    async fn keys_of(&self, name: &str) -> Vec<String> {
        let keys = [
            name.to_string(),
            format!("redisson_lock_queue:{{{name}}}"),
            format!("redisson_lock_timeout:{{{name}}}"),
        ];
        let mut left = Vec::new();
        for (index, raw) in self.raw.iter().enumerate() {
            for key in &keys {
                if key_exists(&mut raw.clone(), key).await {
                    left.push(format!("master {index}: {key}"));
                }
            }
        }
        left
    }
}

/// Closes every connection to the server but `raw`'s, at once (a connection dropped by a
/// client is otherwise closed whenever the server gets to it).
async fn kill_other_connections(raw: &MultiplexedConnection) {
    for kind in ["normal", "pubsub"] {
        let _: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg(kind)
            .arg("SKIPME")
            .arg("yes")
            .query_async(&mut raw.clone())
            .await
            .unwrap();
    }
}

/// One test of the matrix: every entry point of `point` cancelled there in turn.
async fn cell(kind: Kind, point: Point, redis: Redis) {
    let scene = Scene::start(kind, redis).await;
    for &entry in point.entries() {
        scene.cancel(point, entry).await;
    }
}

/// The matrix: for each kind, its cancel points, each with Redis up and frozen.
macro_rules! matrix {
    ($($kind_mod:ident: $kind:expr => [$($point_mod:ident: $point:expr),* $(,)?];)*) => {$(
        mod $kind_mod {
            use super::*;
            $(
                mod $point_mod {
                    use super::*;

                    #[tokio::test]
                    async fn redis_up() {
                        cell($kind, $point, Redis::Up).await;
                    }

                    #[tokio::test]
                    async fn redis_frozen() {
                        cell($kind, $point, Redis::Frozen).await;
                    }
                }
            )*
        }
    )*};
}

matrix! {
    rlock: Kind::RLock => [
        in_the_first_script_call: Point::FirstScript,
        while_subscribing: Point::Subscribing,
        in_the_script_call_after_subscribing: Point::ScriptAfterSubscribing,
        while_waiting: Point::Waiting,
    ];
    fair_lock: Kind::FairLock => [
        in_the_first_script_call: Point::FirstScript,
        while_subscribing: Point::Subscribing,
        in_the_script_call_after_subscribing: Point::ScriptAfterSubscribing,
        while_waiting: Point::Waiting,
    ];
    fenced_lock: Kind::FencedLock => [
        in_the_first_script_call: Point::FirstScript,
        while_subscribing: Point::Subscribing,
        in_the_script_call_after_subscribing: Point::ScriptAfterSubscribing,
        while_waiting: Point::Waiting,
    ];
    redlock: Kind::RedLock => [
        in_the_first_script_call: Point::FirstScript,
        after_taking_some_masters: Point::SomeMastersTaken,
        while_subscribing: Point::Subscribing,
        in_the_script_call_after_subscribing: Point::ScriptAfterSubscribing,
        while_waiting: Point::Waiting,
    ];
    multilock: Kind::MultiLock => [
        in_the_first_script_call: Point::FirstScript,
        after_taking_some_masters: Point::SomeMastersTaken,
        while_subscribing: Point::Subscribing,
        in_the_script_call_after_subscribing: Point::ScriptAfterSubscribing,
        while_waiting: Point::Waiting,
    ];
}

// ---------------------------------------------------------------------------------------
// The cancel point swept in time
// ---------------------------------------------------------------------------------------

/// Calls of `kind` over `masters` masters cancelled after every delay from 0 to
/// `rounds × step`, on a free lock and while a rival holds it and releases it: some are
/// dropped with a script in flight (in a group: in the fan-out, with stragglers out, in the
/// rollback), some while subscribing or waiting, some as they take the lock. Anything a
/// cancelled call took is released in the background right away; the lease (30 s) would
/// be far slower.
async fn sweep(kind: Kind, masters: usize, rounds: u32, step: Duration) {
    let scene = Scene::with_masters(kind, Redis::Up, masters).await;
    let response_timeout = Redis::Up.response_timeout(Point::Waiting);
    let (waiters, rivals) = (
        scene.clients(response_timeout).await,
        scene.clients(response_timeout).await,
    );
    let (lock, rival) = (
        AnyLock::new(kind, &waiters, "racy"),
        AnyLock::new(kind, &rivals, "racy"),
    );
    for round in 0..rounds {
        let held = if round % 2 == 0 {
            // Bounded: a place a cancelled call left at the head of a fair queue would
            // hold the rival off until its deadline.
            let taken = tokio::time::timeout(GENEROUS, rival.call(Entry::Lock)).await;
            Some(taken.expect("the rival got the lock").unwrap().unwrap())
        } else {
            None
        };
        let releaser = held.map(|guard| tokio::spawn(async move { guard.unlock().await }));
        let entry = WAITING_ENTRIES[(round / 2) as usize % WAITING_ENTRIES.len()];
        if let Ok(outcome) = tokio::time::timeout(step * round, lock.call(entry)).await {
            if let Some(guard) = outcome.unwrap() {
                guard.unlock().await.unwrap();
            }
        }
        if let Some(releaser) = releaser {
            releaser.await.unwrap().unwrap();
        }
    }
    let left = settles_to(Vec::new(), SETTLE, || scene.keys_of("racy")).await;
    assert!(
        left.is_empty(),
        "a cancelled call left the lock held: {left:?}"
    );
    for client in &waiters {
        assert_eq!(client.status().subscribed_channels, 0);
        assert_eq!(client.status().queued_waiters, 0);
    }
    eventually("no hold tracked", SETTLE, || {
        waiters.iter().all(|c| c.status().held_locks == 0)
    })
    .await;
}

mod swept_in_time {
    use super::*;

    #[tokio::test]
    async fn rlock_calls_cancelled_at_any_point_never_leave_the_lock_held() {
        sweep(Kind::RLock, 1, 60, Duration::from_micros(50)).await;
    }

    #[tokio::test]
    async fn fair_lock_calls_cancelled_at_any_point_never_leave_the_lock_held_or_a_place() {
        sweep(Kind::FairLock, 1, 60, Duration::from_micros(50)).await;
    }

    #[tokio::test]
    async fn fenced_lock_calls_cancelled_at_any_point_never_leave_the_lock_held() {
        sweep(Kind::FencedLock, 1, 60, Duration::from_micros(50)).await;
    }

    /// A round over five masters is ~0.5 ms here: steps of 20 µs.
    #[tokio::test]
    async fn redlock_calls_cancelled_at_any_point_never_leave_a_lock_held() {
        sweep(Kind::RedLock, 5, 150, Duration::from_micros(20)).await;
    }

    #[tokio::test]
    async fn multilock_calls_cancelled_at_any_point_never_leave_a_lock_held() {
        sweep(Kind::MultiLock, 2, 150, Duration::from_micros(20)).await;
    }
}

// ---------------------------------------------------------------------------------------
// Acquires abandoned inside a batch
// ---------------------------------------------------------------------------------------

const TASKS: usize = 64;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_abandoned_in_a_batch_leave_nothing_held() {
    let server = RedisServer::start();
    let mut conn = server.raw().await;
    let client = client(&server).await;
    for round in 0..6u64 {
        let start = Arc::new(Barrier::new(TASKS));
        let tasks: Vec<_> = (0..TASKS as u64)
            .map(|i| {
                let (lock, start) = (client.lock(format!("left:{round}:{i}")), start.clone());
                // From before the first reply to after the last, across the tasks.
                let patience = Duration::from_micros((i * 37 + round * 101) % 1_500);
                tokio::spawn(async move {
                    start.wait().await;
                    // A 60 s lease: a lock left behind would outlive the test's wait.
                    tokio::time::timeout(patience, lock.lock_with_lease(Duration::from_secs(60)))
                        .await
                        .ok()
                        .map(Result::unwrap)
                })
            })
            .collect();
        // Guards that were returned are dropped here: released in the background too.
        drop(join_all(tasks).await);
    }
    let left = settles_to(0, Duration::from_secs(10), || {
        let mut conn = conn.clone();
        async move { testkit::keys_matching(&mut conn, "left:*").await }
    })
    .await;
    assert_eq!(left, 0, "locks left held by abandoned acquires");
    let _ = &mut conn;
}

// ---------------------------------------------------------------------------------------
// What a cancelled fair waiter hands on
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_cancelled_waiter_leaves_at_once_and_the_next_gets_the_lock() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let [holder_client, a, b] = fair_clients(&server, NO_HEARTBEAT).await;
    let holder = holder_client.fair_lock("cancel").lock().await.unwrap();
    let first = queue_holder(&a, &raw, "cancel").await;
    let second = queue_holder(&b, &raw, "cancel").await;

    let cancelled = Instant::now();
    first.task.abort();
    queue_becomes(
        &raw,
        "cancel",
        &[second.owner.as_str()],
        Duration::from_secs(1),
    )
    .await;
    assert!(cancelled.elapsed() < Duration::from_secs(1));
    assert_eq!(queue_len(&raw, "cancel").await, (1, 1));
    assert_eq!(a.status().queued_waiters, 0);
    assert_eq!(a.status().subscribed_channels, 0);

    let released = Instant::now();
    holder.unlock().await.unwrap();
    let (acquired, guard) = tokio::time::timeout(Duration::from_secs(1), second.task)
        .await
        .expect("the next waiter got the lock within a second of the release")
        .unwrap();
    assert!(acquired - released < Duration::from_secs(1));
    assert!(guard.owner().starts_with(&b.id().to_string()));
    guard.unlock().await.unwrap();
    assert_eq!(queue_len(&raw, "cancel").await, (0, 0));
}

#[tokio::test]
async fn a_head_that_leaves_as_the_lock_frees_passes_it_on() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let [holder_client, a, b] = fair_clients(&server, NO_HEARTBEAT).await;
    let holder = holder_client.fair_lock("pass-on").lock().await.unwrap();
    let head = queue_holder(&a, &raw, "pass-on").await;
    let next = queue_holder(&b, &raw, "pass-on").await;

    // The lock frees without a word to the head (deleted behind the library's back); the
    // head gives up before it looks again: its leaving must tell the next waiter.
    let _: i64 = redis::cmd("DEL")
        .arg("pass-on")
        .query_async(&mut raw)
        .await
        .unwrap();
    head.task.abort();
    let (_, guard) = tokio::time::timeout(Duration::from_secs(1), next.task)
        .await
        .expect("the waiter behind a leaving head got the free lock")
        .unwrap();
    assert!(guard.owner().starts_with(&b.id().to_string()));
    guard.unlock().await.unwrap();
    assert!(holder.unlock().await.unwrap_err().is_lock_lost());
}
