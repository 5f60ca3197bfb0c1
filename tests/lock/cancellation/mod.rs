//! Cancellation: a lock call whose future is dropped (a `timeout` around it, a `select!`,
//! an aborted task) leaves nothing behind. Once the call is dropped its client keeps no
//! subscription and no place in a fair lock's queue for it; and soon after, far sooner than
//! any lease, Redis holds nothing for it either: no field in the lock's hash (not even one
//! a script still in flight took after the caller left), no place in the queue, no
//! subscriber; the lock is free for the next caller as soon as its holder lets go.
//!
//! # The matrix
//!
//! One test per lock kind, cancel point and server state (`matrix::kind::point::redis_state`);
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
//!
//! # Layout
//!
//! The matrix's axes (kinds, entry points, cancel points, Redis states) are in `axes.rs`,
//! a lock and a guard of any kind in `any_lock.rs`, the servers of one test and every
//! step of a cancel in `scene.rs`, and the matrix's tests in `matrix.rs`. The sweep in time
//! is `swept_in_time.rs`, the batch `batch.rs`, the fair waiters `fair_waiters.rs`. This
//! file holds the bounds they share.

mod any_lock;
mod axes;
mod batch;
mod fair_waiters;
mod matrix;
mod scene;
mod swept_in_time;

use std::time::Duration;

/// A bound for steps that take milliseconds, on a loaded machine.
const GENEROUS: Duration = Duration::from_secs(5);
/// Long enough that no heartbeat runs during a test: what happens is the scripts' doing.
const NO_HEARTBEAT: Duration = Duration::from_secs(120);

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
