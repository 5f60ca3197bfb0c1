//! The servers of one matrix test, and every step of a cancel: holding the call at its
//! cancel point, cancelling it, and looking for anything it left behind.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis_rlock::Client;
use testkit::{
    eventually, fair_deadline, fair_queue, info_number, key_exists, lock_hash, settles_to,
    RedisServer,
};

use super::any_lock::AnyLock;
use super::axes::{Entry, Kind, Point, Redis};
use super::{GENEROUS, NO_HEARTBEAT, SETTLE};

/// The servers of one matrix test, and a raw connection to each, opened before any
/// connection is refused.
pub(super) struct Scene {
    kind: Kind,
    redis: Redis,
    servers: Vec<RedisServer>,
    raw: Vec<MultiplexedConnection>,
}

impl Scene {
    /// A scene with as many masters as `kind` spans.
    pub(super) async fn start(kind: Kind, redis: Redis) -> Scene {
        Scene::with_masters(kind, redis, kind.masters()).await
    }

    /// A scene with `masters` masters.
    pub(super) async fn with_masters(kind: Kind, redis: Redis, masters: usize) -> Scene {
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
    pub(super) async fn clients(&self, response_timeout: Duration) -> Vec<Client> {
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
        // The warm-up leaves no unlock latch: no background UNLINK goes out while a test
        // has Redis paused.
        clients
    }

    /// Cancels a call of `entry` at `point` and checks that it left nothing behind.
    pub(super) async fn cancel(&self, point: Point, entry: Entry) {
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
    pub(super) async fn pause_writes(&self, range: std::ops::Range<usize>) {
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
    pub(super) async fn scripts_held(&self, what: &str, range: std::ops::Range<usize>) {
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
    pub(super) async fn refuse_new_connections(&self) -> Vec<i64> {
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

    /// Undoes [`refuse_new_connections`](Self::refuse_new_connections).
    pub(super) async fn accept_connections(&self) {
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
    pub(super) async fn connection_refused(&self, what: &str, before: &Option<Vec<i64>>) {
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
    pub(super) async fn subscribed(&self, what: &str, waiters: &[Client]) {
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
    pub(super) async fn left_for(&self, name: &str, owner: &str) -> Vec<String> {
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
    pub(super) async fn keys_of(&self, name: &str) -> Vec<String> {
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
