//! [`ReadWriteLock`]: many readers or one writer, with Redisson's `RReadWriteLock` layout;
//! its two sides, [`ReadLock`] and [`WriteLock`], are lock kinds of the engine like any
//! other, with every method of a [`Lock`] and the same [`LockGuard`](crate::LockGuard).
//!
//! # Read-write locks
//!
//! ```no_run
//! # async fn demo(client: redis_rlock::Client) -> redis_rlock::Result<()> {
//! use std::time::Duration;
//! let doc = client.read_write_lock("doc:7");
//! let reading = doc.read_lock().lock().await?;        // shared with every other reader
//! reading.unlock().await?;
//! if let Some(writing) = doc.write_lock().try_lock_for(Duration::from_secs(2)).await? {
//!     // ... alone: no reader, no other writer ...
//!     writing.unlock().await?;
//! }
//! # Ok(()) }
//! ```
//!
//! ## What it promises
//!
//! - **Readers share, a writer is alone.** Any number of tasks, here or in other
//!   processes (Rust or Java/Redisson), hold the read lock at once while nobody writes;
//!   the write lock waits until no one reads, and keeps readers and other writers out
//!   while held. Whether readers or writers go first when both wait is not promised: a
//!   release wakes waiters, and the first to retry wins (readers waiting behind a writer
//!   all come in together).
//! - **Both sides are reentrant**, per tokio task, as an [`RLock`](crate::RLock) is: each
//!   acquire is counted, and the side frees with its task's last guard.
//! - **A writer may read (downgrade).** The task holding the write lock may take the read
//!   lock too. Releasing the write lock then leaves the lock held for reading by that
//!   task, and the readers that waited come in at once (they are told).
//! - **A reader cannot write (no upgrade).** The task holding the read lock that asks for
//!   the write lock would wait for itself forever: Redisson's `lock()` does. Here every
//!   acquire of the write lock by a task that holds a live read guard of the same lock, and
//!   not the write lock itself, fails at once with
//!   [`Error::UpgradeRefused`], sending nothing. Release the
//!   read guards first, then take the write lock (someone else may write in between).
//! - **Leases, the watchdog and lost locks** work as for every kind (see the
//!   [guarantees](crate::locks#guarantees-and-caveats)): each read hold has its own lease,
//!   and a read hold whose owner died stops counting when its lease runs out, so the
//!   writer waiting behind it gets the lock when the last live reader leaves, or the lock's
//!   TTL passes, whichever comes first.
//! - **No writer preference**, as in Redisson: a reader gets in whenever the lock is in read
//!   mode, so readers that keep overlapping keep a waiting writer out (BENCHMARKS.md, W7:
//!   6 readers holding 1 ms each left 2 writers one acquisition per second). Where writers
//!   must get in under a steady read load, keep reads short and spaced, or have readers and
//!   writers pass through a [`FairLock`](crate::FairLock) for the moment of acquiring.
//! - **Queries speak of one side**, as Redisson's do: a read lock's
//!   [`is_locked`](crate::Lock::is_locked) is true while anyone reads (the writer's own
//!   reads included), a write lock's while anyone writes;
//!   [`hold_count`](crate::Lock::hold_count) and
//!   [`is_held_by_current_task`](crate::Lock::is_held_by_current_task) count the calling
//!   task's holds on that side; [`remaining_ttl`](crate::Lock::remaining_ttl) is the
//!   lock's. [`force_unlock`](crate::Lock::force_unlock) on the read lock deletes a lock
//!   held for reading, on the write lock one held for writing (with the writer's reads),
//!   and leaves a lock held in the other mode alone (`false`).
//!
//! ## Layout (Redisson's)
//!
//! | what | Redis | notes |
//! |---|---|---|
//! | lock | hash at `<key_prefix><name>` | field `mode` = `read` or `write`; the writer's field `<client-uuid>:<task-id>:write` → count; each reader's field `<client-uuid>:<task-id>` → count |
//! | read hold `n` of a reader | string at `{<key>}:<client-uuid>:<task-id>:rwlock_timeout:<n>` | with the lease of that hold as its PEXPIRE; the hash's TTL is the longest of them (and the writer's lease) |
//! | unlock channel | `redisson_rwlock:{<key>}` | `0` when a read unlock frees the lock (wakes one waiter, a writer); `1` on a write unlock (wakes every waiter) |
//!
//! A key that already contains `{` is used as is in the derived names, so every key and
//! channel of one lock shares its hash slot. The scripts (`read_*.lua`, `write_*.lua`,
//! `rw_*.lua`) refuse a key that holds anything but a read-write lock (a plain
//! [`RLock`](crate::RLock)'s hash, a string, ...) with
//! [`Error::NotALock`], writing nothing; the other kinds' scripts
//! refuse a read-write lock's hash in the same way, a reader's field included.
//!
//! ## Who wakes whom
//!
//! Readers and writers wait on the one channel, through the same waiting loop as every
//! kind, each wait bounded by the lock's TTL. The last read unlock (the last live read
//! hold gone, nobody writing) publishes `0`: one waiter per client wakes, a writer, since
//! readers never wait on a lock held for reading. A write unlock that frees the lock, or
//! leaves it held for reading by the writer's own read holds, publishes `1`: every waiter
//! wakes, all the readers come in, and writers find the lock taken and wait again.
//!
//! ## Differences from Redisson (3.52)
//!
//! Redisson's `RReadWriteLock` and this one share locks; where they differ, it is here:
//!
//! - **A downgrade wakes the readers.** Redisson's write unlock that leaves the lock held
//!   for reading publishes nothing, so its waiting readers (and ours, behind a Redisson
//!   writer) wait out their TTL bound, up to the writer's lease. Ours publishes `1`, which
//!   wakes Redisson's readers too.
//! - **No upgrade deadlock**: [`Error::UpgradeRefused`] at
//!   once, where Redisson's `lock()` waits forever and `tryLock` returns false after its
//!   wait.
//! - **A write re-entry does not add up leases.** Redisson sets the hash's TTL to what was
//!   left plus the lease at each re-entry, so a writer that re-entered `n` times and died
//!   keeps the lock for up to `n` leases; here it becomes the longer of the two, which also
//!   keeps a [maximum hold time](crate::Lock::with_max_hold) a bound.
//! - **One lease per read hold.** Redisson gives each read acquire's timeout key its own
//!   lease and leaves it there; here a re-entry or a release that keeps holds sets the
//!   lease of all the task's timeout keys, as a reentrant lock's re-entry sets its key's:
//!   the guards of one task share one validity.
//! - **No lease is ever cut short by another holder's call.** Redisson's renewal sets the
//!   hash's TTL to its own lease, and its read unlock to the longest remaining read hold's
//!   even while the writer holds the lock: either can end another holder's longer lease
//!   early. Here renewals and re-entries only lengthen it, and a write unlock that leaves
//!   read holds sets it to the longest of theirs (Redisson keeps the writer's), deleting
//!   the lock when none of them is live.
//! - **Redisson 3.52's read renewal** fails while any reader of the lock holds it more than
//!   once (a shadowed loop variable; fixed in Redisson 4.0), so a Java reader's watchdog
//!   stops renewing, and its lock expires after `lockWatchdogTimeout` while held, as soon
//!   as any reader, Java or Rust, re-enters. It also re-expires every reader's timeout keys,
//!   not only its own (fixed in 4.4): a Redisson reader with a short watchdog lease can
//!   shorten a Rust reader's longer fixed lease. Use Redisson 4.4 or later beside Rust
//!   readers that re-enter or take long fixed leases.
//! - **Refusals and clean-up.** Redisson's scripts write a `mode` into a plain lock's hash
//!   or fail with `WRONGTYPE` on other data; here both are refused before anything is
//!   written. A force unlock also deletes the read holds' timeout keys, which Redisson
//!   leaves to expire; a read unlock of a lock that is gone publishes nothing.

use std::sync::Arc;

use crate::client_core::Core;
use crate::error::{Error, Result};
use crate::holds::Renewal;
use crate::locks::lock::Lock;
use crate::protocol::kinds::Side;
use crate::protocol::names::LockNames;

// The sides' kinds and handle types are defined in the table of kinds, and are this
// module's items as well.
pub use crate::locks::kind::{Read, ReadLock, Write, WriteLock};

/// A read-write lock: many readers at once, or one writer (Redisson's `RReadWriteLock`,
/// with its Redis layout, so Java services using Redisson share it). Made by
/// [`Client::read_write_lock`](crate::Client::read_write_lock); cheap to clone.
///
/// Its two sides are locks of their own, [`ReadLock`] and [`WriteLock`], on one Redis
/// hash: reentrant per tokio task, under the watchdog or a fixed lease, with
/// [`lost`](crate::LockGuard::lost) reporting. The writer's task may take the read lock
/// too (a downgrade: release the write lock and keep reading); the reader's task asking for
/// the write lock gets [`Error::UpgradeRefused`] at once,
/// where Redisson waits forever. The layout, who wakes whom and the differences from
/// Redisson are in the [module docs](crate::locks::read_write).
///
/// ```no_run
/// # async fn demo(client: redis_rlock::Client) -> redis_rlock::Result<()> {
/// let doc = client.read_write_lock("doc:7");
/// let writing = doc.write_lock().lock().await?;
/// // ... update the document ...
/// let reading = doc.read_lock().lock().await?; // the writer may read
/// writing.unlock().await?;                     // still held, for reading: readers come in
/// // ... read what was written, alongside other readers ...
/// reading.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ReadWriteLock {
    read: ReadLock,
    write: WriteLock,
}

impl std::fmt::Debug for ReadWriteLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadWriteLock")
            .field("name", &self.read.name())
            .finish()
    }
}

impl ReadWriteLock {
    pub(crate) fn new(core: Arc<Core>, name: &str) -> Self {
        ReadWriteLock {
            read: Lock::new(core.clone(), name),
            write: Lock::new(core, name),
        }
    }

    /// The read lock: shared while nobody writes.
    pub fn read_lock(&self) -> ReadLock {
        self.read.clone()
    }

    /// The write lock: exclusive.
    pub fn write_lock(&self) -> WriteLock {
        self.write.clone()
    }

    /// The lock's name, as given to
    /// [`Client::read_write_lock`](crate::Client::read_write_lock) (without the key
    /// prefix).
    pub fn name(&self) -> &str {
        self.read.name()
    }
}

/// Refuses a write lock's acquire by a task that holds the read lock of the same lock
/// and not its write lock: it would wait for its own read holds forever. `task` is the
/// task's reader field, `owner` its writer field. Nothing to check for other kinds.
pub(crate) fn refuse_upgrade(
    core: &Core,
    names: &LockNames,
    task: &Arc<str>,
    owner: &Arc<str>,
) -> Result<()> {
    if names.kind.side != Some(Side::Write) {
        return Ok(());
    }
    let holds = &core.holds;
    // The task's live hold under its reader field, if it is a read lock's (a plain lock's
    // has the same field, and its key is refused as no read-write lock anyway).
    let reads = holds.live(&holds.id(&names.key, task)).is_some_and(|hold| {
        matches!(
            hold.renewal,
            Renewal::ReadWrite {
                read_timeouts: Some(_)
            }
        )
    });
    if reads && !holds.is_held(&holds.id(&names.key, owner)) {
        return Err(Error::UpgradeRefused {
            name: names.key.to_string(),
        });
    }
    Ok(())
}
