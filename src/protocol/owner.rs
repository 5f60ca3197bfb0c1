//! Who is asking for a lock: the hash field `<client-uuid>:<task-id>`.
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
        let field = owner_field(client_id, task);
        *last = Some((task, field.clone()));
        field
    })
}

fn owner_field(client_id: &str, task: Option<tokio::task::Id>) -> Arc<str> {
    match task {
        Some(task) => format!("{client_id}:{task}").into(),
        None => {
            let thread = THREAD_FALLBACK_ID.with(|id| *id);
            format!("{client_id}:{thread}").into()
        }
    }
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
}
