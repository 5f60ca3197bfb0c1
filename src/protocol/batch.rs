//! Coalescing the concurrent calls of one script into multi-key calls.
//!
//! Redis spends more on running a script call than on the few commands a lock script makes
//! (see BENCHMARKS.md: server CPU per pair), so a client with many tasks taking and
//! releasing locks at once is bound by the number of script calls. Here, a call goes out at
//! once, alone, while fewer than [`MAX_IN_FLIGHT`] calls of its kind are waiting for Redis:
//! a lone caller pays nothing for the batching. Calls that arrive while that many are in
//! flight queue up, and as soon as one in flight is answered, everything queued goes out
//! as one call of the same script over all their keys. The busier the client, the bigger
//! the batches, with no timer and no extra wait for anyone.
//!
//! Every item of a batch gets its own reply, as if it had been sent alone; a failed call
//! fails every item in it, each then retried (or undone) by its own caller as before.
//!
//! On a Redis Cluster a batch goes out as one call per master, all at once: a script call
//! may declare keys of one hash slot only (Redis refuses others with `CROSSSLOT`), so it
//! declares those of one slot, which route it, and passes the items of the master's other
//! slots undeclared, which the two batched scripts read and may touch there. Which master
//! serves which slot the batcher reads itself (`CLUSTER SLOTS`, [`Owners`]). When the map
//! is out of date, an item whose slot the call's node no longer serves answers
//! [`NOT_HERE`] with nothing written for it, and is sent again alone, to its own slot's
//! master; the map is then read again. A stale map costs calls, never an answer.

use std::sync::{Arc, Mutex};

use crate::protocol::conn::{Conn, EvalSha};
use crate::protocol::slot::node_batches;
use crate::protocol::slot_map::Owners;
use crate::util::poison;
use redis::{ErrorKind, RedisError, RedisResult, ServerErrorKind};
use tokio::sync::oneshot;

/// Calls of one kind that may wait for Redis at once before new ones queue up. The
/// multiplexed connection already writes concurrent calls in one go, so a few calls in
/// flight keep Redis busy while the next batch gathers; with only two, 32 busy tasks left
/// Redis idle a third of the time between batches (the benchmark's W2 measured 0.6 of
/// rslock's pairs/s with 2, 0.9 to 1.0 with 8, and 0.5 with no limit, when batches no
/// longer form).
const MAX_IN_FLIGHT: usize = 8;

/// Items in one call at most, so that one script call cannot block Redis for long.
const MAX_ITEMS: usize = 256;

/// What a batched script answers for an undeclared item whose slot the node it ran on does
/// not serve: nothing was written for it.
const NOT_HERE: i64 = -7;

/// A script that runs over any number of items in one call.
pub(crate) trait Batched: Send + Sync + Sized + 'static {
    type Reply: Send + 'static;

    /// The item's lock key, whose hash slot the item's keys share.
    fn key(&self) -> &str;

    /// The script call over `items` (at least one), answering one code per item, in
    /// order: the first `declared` (at least one, of one hash slot) declared as keys, the
    /// others passed undeclared (on a cluster, of other slots of the same master); `lone`:
    /// one item, whose code comes bare.
    fn call(items: &[Self], declared: usize, lone: bool) -> EvalSha<'static>;

    /// What an item's code means.
    fn reply(code: i64) -> Self::Reply;
}

/// Runs one item alone, the common case: the script answers its reply bare, not as an
/// array of one, which spares the caller an allocation and most of the reply parsing
/// (about 3,000 instructions of a lock-unlock pair, measured with callgrind).
pub(crate) async fn send_one<T: Batched>(conn: &mut Conn, item: &T) -> RedisResult<T::Reply> {
    let code: i64 = T::call(std::slice::from_ref(item), 1, true)
        .query(conn)
        .await?;
    Ok(T::reply(code))
}

/// Coalesces the concurrent calls of one [`Batched`] script of a client.
pub(crate) struct Batcher<T: Batched> {
    state: Mutex<State<T>>,
    /// On a cluster: which master serves each slot, to split batches per master.
    owners: Option<Arc<Owners>>,
    /// Where queued batches are sent from: the client's runtime, which drives its
    /// connections.
    runtime: tokio::runtime::Handle,
}

struct State<T: Batched> {
    in_flight: usize,
    /// Non-empty only while `in_flight` is at its maximum.
    queued: Vec<Queued<T>>,
}

struct Queued<T: Batched> {
    item: T,
    reply: oneshot::Sender<RedisResult<T::Reply>>,
}

impl<T: Batched> Batcher<T> {
    /// `cluster`: the client talks to a cluster, where one call may declare one slot's
    /// keys and reach one master.
    pub(crate) fn new(runtime: tokio::runtime::Handle, cluster: bool) -> Arc<Self> {
        Arc::new(Batcher {
            state: Mutex::new(State {
                in_flight: 0,
                queued: Vec::new(),
            }),
            owners: cluster.then(Arc::default),
            runtime,
        })
    }

    /// `batch` as script calls, each with the number of items it declares: one call on one
    /// Redis; on a cluster, one per master by the slot map (see [`Owners::map`]).
    async fn calls(&self, batch: Vec<Queued<T>>, conn: &Conn) -> Vec<(Vec<Queued<T>>, usize)> {
        let Some(owners) = &self.owners else {
            let declared = batch.len();
            return vec![(batch, declared)];
        };
        let map = owners.map(conn, &self.runtime).await;
        node_batches(batch, map.as_deref(), MAX_ITEMS, |queued| {
            queued.item.key().as_bytes()
        })
    }

    /// Runs `item` on `conn`, alone or in a batch with others.
    ///
    /// # Cancel safety
    /// As for a plain script call: dropping the future does not take the command back.
    /// Other callers' items never depend on this future being polled.
    pub(crate) async fn call(self: &Arc<Self>, conn: Conn, item: T) -> RedisResult<T::Reply> {
        // A place in flight for `item`, or a place in the queue for the next batch.
        let in_flight = {
            let mut state = poison::locked(&self.state);
            if state.in_flight < MAX_IN_FLIGHT {
                state.in_flight += 1;
                Ok(item)
            } else {
                let (reply, answer) = oneshot::channel();
                state.queued.push(Queued { item, reply });
                Err(answer)
            }
        };
        let item = match in_flight {
            Ok(item) => item,
            Err(answer) => return answer.await.unwrap_or_else(|_| Err(abandoned())),
        };
        // Hands the queue on when this call is answered, or abandoned.
        let mut slot = Slot {
            batcher: self.clone(),
            conn,
        };
        send_one(&mut slot.conn, &item).await
    }
}

/// One of the [`MAX_IN_FLIGHT`] places of a batcher, taken by a call in flight. When the
/// call ends, however it ends, the place goes to the calls queued meanwhile, sent as one
/// batch, or is given back.
struct Slot<T: Batched> {
    batcher: Arc<Batcher<T>>,
    /// The connection the next batch goes out on.
    conn: Conn,
}

impl<T: Batched> Drop for Slot<T> {
    fn drop(&mut self) {
        let batch: Vec<Queued<T>> = {
            let mut state = poison::locked(&self.batcher.state);
            if state.queued.is_empty() {
                state.in_flight -= 1;
                return;
            }
            let take = state.queued.len().min(MAX_ITEMS);
            state.queued.drain(..take).collect()
        };
        let next = Slot {
            batcher: self.batcher.clone(),
            conn: self.conn.clone(),
        };
        // Spawned, so that the caller whose call just ended goes on at once. Should the
        // runtime be gone, the task is dropped unrun: its slot is handed on or given back,
        // and the queued callers get an error.
        self.batcher.runtime.spawn(async move {
            let slot = next;
            // On a cluster, one call per master, all in flight at once under this one place.
            let calls = slot.batcher.calls(batch, &slot.conn).await;
            futures_util::future::join_all(calls.into_iter().map(|(group, declared)| {
                let mut conn = slot.conn.clone();
                let owners = slot.batcher.owners.as_deref();
                async move { send_batch(&mut conn, group, declared, owners).await }
            }))
            .await;
        });
    }
}

/// Sends `batch` as one call, its first `declared` items declared, and hands each caller
/// its reply. `owners`: a cluster's slot map, marked stale when an item was not served
/// where it said.
async fn send_batch<T: Batched>(
    conn: &mut Conn,
    batch: Vec<Queued<T>>,
    declared: usize,
    owners: Option<&Owners>,
) {
    let (items, waiting): (Vec<T>, Vec<_>) = batch.into_iter().map(|q| (q.item, q.reply)).unzip();
    let mut alone = Vec::new();
    match T::call(&items, declared, false)
        .query::<Vec<i64>>(conn)
        .await
    {
        Ok(codes) if codes.len() == waiting.len() => {
            for ((code, caller), item) in codes.into_iter().zip(waiting).zip(items) {
                if code == NOT_HERE {
                    alone.push((item, caller));
                } else {
                    // A caller that left has its own clean-up for what its item did.
                    let _ = caller.send(Ok(T::reply(code)));
                }
            }
            if let (false, Some(owners)) = (alone.is_empty(), owners) {
                owners.stale();
            }
        }
        // Redis refused the call before running anything, for one item's sake: a key the
        // user may not touch (an ACL user limited to key patterns), or on a cluster a
        // declared slot served elsewhere (the undeclared ones may not be). One caller's
        // lock must not fail the others'. Sent again one by one, each caller gets its own
        // answer.
        Err(e) if items.len() > 1 && refused_before_running(&e) => {
            if let (true, Some(owners)) = (e.code() != Some("NOPERM"), owners) {
                owners.stale();
            }
            alone = items.into_iter().zip(waiting).collect();
        }
        failed => {
            let error = failed.err().unwrap_or_else(wrong_reply_count);
            for caller in waiting {
                let _ = caller.send(Err(error.clone()));
            }
        }
    }
    // Alone, each goes to its own slot's master (redis-rs routes by its key), all at once.
    futures_util::future::join_all(alone.into_iter().map(|(item, caller)| {
        let mut conn = conn.clone();
        async move {
            let _ = caller.send(send_one(&mut conn, &item).await);
        }
    }))
    .await;
}

/// Whether the refusal of a batch's call is for one of its items, and certainly ran
/// nothing: `NOPERM` for a declared key, or `MOVED`/`ASK` for the declared slot.
fn refused_before_running(e: &RedisError) -> bool {
    e.code() == Some("NOPERM")
        || matches!(
            e.kind(),
            ErrorKind::Server(ServerErrorKind::Moved | ServerErrorKind::Ask)
        )
}

fn wrong_reply_count() -> RedisError {
    RedisError::from((
        ErrorKind::UnexpectedReturnType,
        "a batched script answered a different number of replies than it got items",
    ))
}

/// The batch of a queued call was dropped unsent: the client's runtime is shutting down.
fn abandoned() -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::ConnectionAborted,
        "the client's runtime stopped before the call was sent",
    ))
}
