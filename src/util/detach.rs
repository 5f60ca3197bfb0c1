//! Futures that finish their Redis call even when the caller stops waiting for it.
//!
//! Dropping a future in the middle of a script call does not take the command back: Redis
//! may still run it. An acquire that succeeded for a caller who is gone would leave the lock
//! held with no guard to release it. Wrapped in [`FinishOnDrop`], the call is driven to its
//! end on the runtime instead, and its result handed to a clean-up.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::lifecycle::Background;

/// A future that can be sent to a runtime to finish there, output and all.
pub(crate) trait Detachable: Future<Output: Send + 'static> + Send + 'static {}

impl<F: Future<Output: Send + 'static> + Send + 'static> Detachable for F {}

/// Drives `future`; if dropped before it completes, spawns the rest of it on the current
/// runtime and passes its output to `orphaned`.
///
/// `O` is a type parameter rather than a boxed closure: every lock and unlock call makes
/// one of these, and the clean-up is almost never needed.
pub(crate) struct FinishOnDrop<F: Detachable, O: FnOnce(F::Output) + Send + 'static> {
    future: Option<Pin<Box<F>>>,
    orphaned: Option<O>,
    /// Where the rest runs if dropped: the current runtime when `None`.
    background: Option<Background>,
}

impl<F: Detachable, O: FnOnce(F::Output) + Send + 'static> FinishOnDrop<F, O> {
    pub(crate) fn new(future: F, orphaned: O) -> Self {
        FinishOnDrop {
            future: Some(Box::pin(future)),
            orphaned: Some(orphaned),
            background: None,
        }
    }

    /// Finishes on `background` if dropped (a client's runtime, which outlives a caller's
    /// runtime that is shutting down, and where the client's shutdown waits for it) rather
    /// than on the current runtime.
    pub(crate) fn on(mut self, background: &Background) -> Self {
        self.background = Some(background.clone());
        self
    }
}

// The future is boxed and the clean-up is never pinned: moving the wrapper moves neither.
impl<F: Detachable, O: FnOnce(F::Output) + Send + 'static> Unpin for FinishOnDrop<F, O> {}

impl<F: Detachable, O: FnOnce(F::Output) + Send + 'static> Future for FinishOnDrop<F, O> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let Some(future) = self.future.as_mut() else {
            panic!("FinishOnDrop polled after completion");
        };
        let output = std::task::ready!(future.as_mut().poll(cx));
        self.future = None;
        Poll::Ready(output)
    }
}

impl<F: Detachable, O: FnOnce(F::Output) + Send + 'static> Drop for FinishOnDrop<F, O> {
    fn drop(&mut self) {
        let (Some(future), Some(orphaned)) = (self.future.take(), self.orphaned.take()) else {
            return;
        };
        let rest = async move { orphaned(future.await) };
        if let Some(background) = self.background.take() {
            background.spawn(rest);
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(rest);
            }
            Err(_) => tracing::warn!(
                "a Redis call was abandoned outside any runtime; \
                 a lock it took expires with its lease"
            ),
        }
    }
}
