//! The raw floors: the library's own Lua scripts called directly with EVALSHA on one
//! redis-rs multiplexed connection (or, for W6, one redis-rs cluster connection), with no
//! library around them; and SET NX PX with a compare-and-delete script, what non-reentrant
//! locks do.

use std::future::Future;
use std::sync::Arc;

use futures_util::StreamExt;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::Script;

use crate::common::interleave::PairFuture;

/// `lua/acquire.lua` as the library sends it: after the helpers it shares.
pub const ACQUIRE_SOURCE: &str = concat!(
    include_str!("../../lua/lock_common.lua"),
    include_str!("../../lua/acquire.lua")
);

pub const UNLOCK_SOURCE: &str = include_str!("../../lua/unlock.lua");

pub const RENEW_SOURCE: &str = include_str!("../../lua/renew.lua");

const DELETE_SOURCE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

/// A fresh multiplexed connection to `url`.
pub async fn connect(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .expect("a valid redis url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect to the benchmark's redis-server")
}

/// A connection the raw hash floor runs on: a multiplexed connection to one Redis, or a
/// redis-rs cluster connection (which routes each call by its first key's slot).
pub trait FloorConn: ConnectionLike + Clone + Send + Sync + 'static {}

impl<C: ConnectionLike + Clone + Send + Sync + 'static> FloorConn for C {}

/// The raw hash-script floor on one lock: the library's acquire and unlock scripts, two
/// round trips per pair.
pub struct RawHash<C = MultiplexedConnection> {
    conns: Vec<C>,
    acquire: Script,
    unlock: Script,
    key: String,
    channel: String,
    owner: String,
}

impl<C: FloorConn> RawHash<C> {
    /// The floor on `key` through `conns`: one connection, or one per master (each step
    /// then done when a majority has answered, as a RedLock's are); `task` makes the owner.
    pub fn new(conns: Vec<C>, key: &str, task: usize) -> Arc<RawHash<C>> {
        Arc::new(RawHash {
            conns,
            acquire: Script::new(ACQUIRE_SOURCE),
            unlock: Script::new(UNLOCK_SOURCE),
            key: key.to_string(),
            channel: format!("redisson_lock__channel:{{{key}}}"),
            owner: format!("00000000-0000-4000-8000-000000000000:{task}"),
        })
    }

    /// One lock + unlock, as a boxed future for [`crate::common::interleave`].
    pub fn pair(self: &Arc<Self>) -> PairFuture {
        let floor = self.clone();
        Box::pin(async move { floor.run_pair().await })
    }

    async fn run_pair(&self) {
        let quorum = self.conns.len() / 2 + 1;
        let acquired = first_answers(&self.conns, quorum, |conn| self.acquire_on(conn)).await;
        assert!(acquired.iter().all(|got| got == &[-3]), "acquired");
        let freed = first_answers(&self.conns, quorum, |conn| self.unlock_on(conn)).await;
        assert!(freed.iter().all(|got| got == &[1]), "freed");
    }

    async fn acquire_on(&self, mut conn: C) -> Vec<i64> {
        self.acquire
            .key(&self.key)
            .arg(30_000)
            .arg(&self.owner)
            .invoke_async(&mut conn)
            .await
            .unwrap()
    }

    /// `lua/unlock.lua` with one release: the lock; the message and the publish command;
    /// the channel, the lease (re-applied only while holds remain), the owner, not a retry, and one hold expected.
    async fn unlock_on(&self, mut conn: C) -> Vec<i64> {
        self.unlock
            .key(&self.key)
            .arg("0")
            .arg("publish")
            .arg(&self.channel)
            .arg(30_000)
            .arg(&self.owner)
            .arg("0")
            .arg("1")
            .invoke_async(&mut conn)
            .await
            .unwrap()
    }
}

/// Runs `call` on every connection at once; returns the first `quorum` answers, leaving
/// the others to arrive on their own. With one connection, just the call.
async fn first_answers<'a, C, F, Fut>(conns: &'a [C], quorum: usize, call: F) -> Vec<Vec<i64>>
where
    C: FloorConn,
    F: Fn(C) -> Fut,
    Fut: Future<Output = Vec<i64>> + 'a,
{
    if let [conn] = conns {
        return vec![call(conn.clone()).await];
    }
    conns
        .iter()
        .map(|conn| call(conn.clone()))
        .collect::<futures_util::stream::FuturesUnordered<_>>()
        .take(quorum)
        .collect()
        .await
}

/// The second floor: SET NX PX and a compare-and-delete script.
pub struct RawSetNx {
    conn: MultiplexedConnection,
    delete: Script,
    key: String,
}

impl RawSetNx {
    pub fn new(conn: MultiplexedConnection, key: &str) -> Arc<RawSetNx> {
        Arc::new(RawSetNx {
            conn,
            delete: Script::new(DELETE_SOURCE),
            key: key.to_string(),
        })
    }

    pub fn pair(self: &Arc<Self>) -> PairFuture {
        let floor = self.clone();
        Box::pin(async move { floor.run_pair().await })
    }

    async fn run_pair(&self) {
        let mut conn = self.conn.clone();
        let ok: Option<String> = redis::cmd("SET")
            .arg(&self.key)
            .arg("token")
            .arg("NX")
            .arg("PX")
            .arg(30_000)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(ok.is_some());
        let deleted: i64 = self
            .delete
            .key(&self.key)
            .arg("token")
            .invoke_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(deleted, 1);
    }
}
