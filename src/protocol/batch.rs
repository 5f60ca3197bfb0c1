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
//! On a Redis Cluster a script call may only name keys of one hash slot, so a batch is
//! split per slot and its calls go out together, one per slot.

use std::sync::{Arc, Mutex};

use crate::protocol::conn::{Conn, EvalSha};
use crate::protocol::slot::batches;
use crate::util::poison;
use redis::{ErrorKind, RedisError, RedisResult};
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

/// A script that runs over any number of items in one call.
pub(crate) trait Batched: Send + Sync + Sized + 'static {
    type Reply: Send + 'static;

    /// The item's lock key, whose hash slot the item's keys share.
    fn key(&self) -> &str;

    /// The script call over `items` (at least one, of one hash slot), answering one code
    /// per item, in order; `lone`: one item, whose code comes bare.
    fn call(items: &[Self], lone: bool) -> EvalSha<'static>;

    /// What an item's code means.
    fn reply(code: i64) -> Self::Reply;
}

/// Runs one item alone, the common case: the script answers its reply bare, not as an
/// array of one, which spares the caller an allocation and most of the reply parsing
/// (about 3,000 instructions of a lock-unlock pair, measured with callgrind).
pub(crate) async fn send_one<T: Batched>(conn: &mut Conn, item: &T) -> RedisResult<T::Reply> {
    let code: i64 = T::call(std::slice::from_ref(item), true)
        .query(conn)
        .await?;
    Ok(T::reply(code))
}

/// Coalesces the concurrent calls of one [`Batched`] script of a client.
pub(crate) struct Batcher<T: Batched> {
    state: Mutex<State<T>>,
    /// On a cluster: batches are split per hash slot.
    per_slot: bool,
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
    /// `per_slot`: the client talks to a cluster, where one call may name one slot's keys.
    pub(crate) fn new(runtime: tokio::runtime::Handle, per_slot: bool) -> Arc<Self> {
        Arc::new(Batcher {
            state: Mutex::new(State {
                in_flight: 0,
                queued: Vec::new(),
            }),
            per_slot,
            runtime,
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
        let per_slot = self.batcher.per_slot;
        self.batcher.runtime.spawn(async move {
            let slot = next;
            // On a cluster, one call per slot, all in flight at once under this one place.
            let groups = if per_slot {
                batches(batch, true, MAX_ITEMS, |queued| {
                    queued.item.key().as_bytes()
                })
            } else {
                vec![batch]
            };
            futures_util::future::join_all(groups.into_iter().map(|group| {
                let mut conn = slot.conn.clone();
                async move { send_batch(&mut conn, group).await }
            }))
            .await;
        });
    }
}

/// Sends `batch` as one call and hands each caller its reply.
async fn send_batch<T: Batched>(conn: &mut Conn, batch: Vec<Queued<T>>) {
    let (items, waiting): (Vec<T>, Vec<_>) = batch.into_iter().map(|q| (q.item, q.reply)).unzip();
    match T::call(&items, false).query::<Vec<i64>>(conn).await {
        Ok(codes) if codes.len() == waiting.len() => {
            for (code, caller) in codes.into_iter().zip(waiting) {
                // A caller that left has its own clean-up for what its item did.
                let _ = caller.send(Ok(T::reply(code)));
            }
        }
        // Redis refused a key of the batch before running anything (an ACL user limited
        // to key patterns): one caller's lock name must not fail the others'. Sent again
        // one by one, each caller gets its own answer.
        Err(e) if e.code() == Some("NOPERM") && items.len() > 1 => {
            for (item, caller) in items.into_iter().zip(waiting) {
                let _ = caller.send(send_one(conn, &item).await);
            }
        }
        failed => {
            let error = failed.err().unwrap_or_else(wrong_reply_count);
            for caller in waiting {
                let _ = caller.send(Err(error.clone()));
            }
        }
    }
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
