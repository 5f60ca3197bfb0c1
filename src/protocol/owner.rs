//! Who is asking for a lock: the hash field `<client-uuid>:<task-id>`, or an explicit
//! [`Owner`]'s `<client-uuid>:<id>`.
//!
//! Redisson keys reentrancy to a Java thread id; here the unit is the tokio task, which is
//! what a nested critical section in async code runs in. The id is a decimal number, so a
//! Java client reading the hash sees the same shape it writes.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Fallback ids for code running outside any task (inside `block_on`, and so in the body of
/// `#[tokio::main]` and `#[tokio::test]`). Tokio's task ids come from one process-wide
/// counter starting at 1, so ids with bit 62 set can never meet one, and stay below
/// `i64::MAX` for Java readers.
const FALLBACK_BASE: u64 = 1 << 62;

static NEXT_FALLBACK: AtomicU64 = AtomicU64::new(0);

/// Ids of explicit [`Owner`]s: bit 61 set and bit 62 clear, so that they meet neither a
/// tokio task id (one process-wide counter from 1, which would need 2^61 tasks to get
/// there) nor a thread's fallback id, and stay below `i64::MAX` for Java readers.
const OWNER_BASE: u64 = 1 << 61;

static NEXT_OWNER: AtomicU64 = AtomicU64::new(0);

/// Who holds a lock, chosen by the caller rather than by the task it runs in.
///
/// By default a lock's owner is the calling tokio task: its hash field is
/// `<client-uuid>:<task-id>`, and every call from that task re-enters. Futures that one
/// task polls concurrently (`join!`, `select!`, `FuturesUnordered`, `buffer_unordered`,
/// stream combinators) are then one owner, and their critical sections overlap. An `Owner`
/// names a holder explicitly: bind it to a handle with
/// [`Lock::with_owner`](crate::Lock::with_owner) (or
/// [`RedLock::with_owner`](crate::RedLock::with_owner)), and calls through that handle
/// re-enter only that owner's holds, whichever task makes them; other owners wait, even in
/// the same task. The field is `<client-uuid>:<id>`, with a fresh decimal id, so a Redisson
/// client reads it as it reads its own thread ids.
///
/// Made by [`Client::new_owner`](crate::Client::new_owner); `Copy`, so one owner can be
/// handed to every future of one job. For a lock that never re-enters, see
/// [`Lock::non_reentrant`](crate::Lock::non_reentrant).
///
/// ```no_run
/// # async fn demo(client: redis_rlock::Client) -> redis_rlock::Result<()> {
/// use futures_util::stream::{self, StreamExt};
/// let jobs = stream::iter(0..4).map(|job| {
///     // One owner per job: the four run in one task, yet only one is inside at a time.
///     let lock = client.lock("ledger").with_owner(client.new_owner());
///     async move {
///         let guard = lock.lock().await?;
///         // ... the critical section of `job` ...
///         # let _ = job;
///         guard.unlock().await
///     }
/// });
/// let results: Vec<_> = jobs.buffer_unordered(4).collect().await;
/// # let _ = results;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Owner {
    id: u64,
}

impl Owner {
    /// A fresh owner, never handed out before in this process.
    pub(crate) fn new() -> Self {
        Owner {
            id: OWNER_BASE | NEXT_OWNER.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// The decimal id that follows the client's UUID in the owner's hash field.
    pub fn id(&self) -> u64 {
        self.id
    }

    fn field(self, client_id: &str) -> Arc<str> {
        format!("{client_id}:{}", self.id).into()
    }
}

/// Whose name a lock handle takes its locks in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Identity {
    /// The calling task's (or, outside any task, thread's): the default.
    #[default]
    Task,
    /// One explicit owner's.
    Owner(Owner),
    /// A fresh owner's for every acquire: a second acquire waits for the first.
    EachAcquire,
}

impl Identity {
    /// The owner field `<client-uuid>:<id>` an acquire through a handle of this identity
    /// takes its lock in (a read-write lock's write side adds its suffix to it).
    pub(crate) fn field(self, client_id: &str) -> Arc<str> {
        match self {
            Identity::Task => current_owner_field(client_id),
            Identity::Owner(owner) => owner.field(client_id),
            Identity::EachAcquire => Owner::new().field(client_id),
        }
    }
}

thread_local! {
    static THREAD_FALLBACK_ID: u64 = FALLBACK_BASE | NEXT_FALLBACK.fetch_add(1, Ordering::Relaxed);

    /// The field made last on this thread, with the task it names (`None`: the thread).
    /// A task asks for its own field at each acquire, and formatting it costs more than
    /// the rest of building the call.
    static LAST_FIELD: RefCell<Option<(Option<tokio::task::Id>, Arc<str>)>> =
        const { RefCell::new(None) };
}

/// The id of the current tokio task, or of the current thread when no task is running.
///
/// Only the decimal form is ever needed, so the task id is written through its `Display`
/// (tokio offers no integer accessor).
pub(crate) fn current_owner_field(client_id: &str) -> Arc<str> {
    let task = tokio::task::try_id();
    LAST_FIELD.with(|last| {
        let mut last = last.borrow_mut();
        if let Some((named, field)) = last.as_ref() {
            if *named == task && names_client(field, client_id) {
                return field.clone();
            }
        }
        let field: Arc<str> = match task {
            Some(task) => format!("{client_id}:{task}").into(),
            None => format!("{client_id}:{}", THREAD_FALLBACK_ID.with(|id| *id)).into(),
        };
        *last = Some((task, field.clone()));
        field
    })
}

/// Whether `field` is `<client_id>:<decimal id>`.
fn names_client(field: &str, client_id: &str) -> bool {
    field
        .strip_prefix(client_id)
        .and_then(|rest| rest.strip_prefix(':'))
        .is_some_and(|id| id.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_a_task_each_thread_has_its_own_high_id() {
        let here = current_owner_field("c");
        assert_eq!(here, current_owner_field("c"));
        let there = std::thread::spawn(|| current_owner_field("c"))
            .join()
            .unwrap();
        assert_ne!(here, there);
        let id: u64 = here.strip_prefix("c:").unwrap().parse().unwrap();
        assert!(id >= FALLBACK_BASE && id < i64::MAX as u64);
    }

    #[tokio::test]
    async fn a_field_is_made_for_its_client_and_task() {
        let (a, b) = tokio::spawn(async { (current_owner_field("a"), current_owner_field("b")) })
            .await
            .unwrap();
        assert_eq!(a.strip_prefix("a:"), b.strip_prefix("b:"));
        let other = tokio::spawn(async { current_owner_field("a") })
            .await
            .unwrap();
        assert_ne!(a, other);
        assert!(current_owner_field("a").starts_with("a:"));
        assert_ne!(current_owner_field("a"), a);
        let (long, short) =
            tokio::spawn(async { (current_owner_field("a:1"), current_owner_field("a")) })
                .await
                .unwrap();
        assert_eq!(long.strip_prefix("a:1:"), short.strip_prefix("a:"));
    }

    #[tokio::test]
    async fn inside_a_task_the_task_id_is_used() {
        let field = tokio::spawn(async { current_owner_field("c") })
            .await
            .unwrap();
        let id: u64 = field.strip_prefix("c:").unwrap().parse().unwrap();
        assert!(id < FALLBACK_BASE);
    }

    #[test]
    fn owners_are_fresh_and_meet_no_task_or_thread_id() {
        let (a, b) = (Owner::new(), Owner::new());
        assert_ne!(a, b);
        for owner in [a, b] {
            assert!(owner.id() >= OWNER_BASE && owner.id() < FALLBACK_BASE);
        }
        assert_eq!(&*Identity::Owner(a).field("c"), format!("c:{}", a.id()));
        assert_ne!(
            Identity::EachAcquire.field("c"),
            Identity::EachAcquire.field("c")
        );
    }
}
