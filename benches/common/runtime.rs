//! The tokio runtime flavours a workload runs on, each counted in worker wake-ups.
//!
//! The current-thread runtime shows the library's own CPU cost; the multi-thread runtime
//! (what `#[tokio::main]` gives) also shows the task wake-ups and cross-thread hand-offs it
//! causes. On the multi-thread runtime the workload runs either in `block_on`, as the body of
//! `#[tokio::main]` does, or in a spawned task, as a request handler does: the connection's
//! driver task then runs on a worker either way, but only the spawned caller can share a
//! worker with it.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::runtime::Runtime;

/// Worker threads unparked so far, by every runtime built here.
static UNPARKS: AtomicU64 = AtomicU64::new(0);

/// Worker threads woken so far (a thread of the current-thread runtime, too, unparks after
/// waiting for I/O).
pub fn unparks() -> u64 {
    UNPARKS.load(Ordering::Relaxed)
}

/// The multi-thread runtime's workers: `WORKERS` if set, else what `#[tokio::main]` starts,
/// one per CPU this process may run on (`TOKIO_WORKER_THREADS`, else the CPUs of its
/// affinity mask: 1 once the client is pinned to one CPU).
pub fn workers() -> usize {
    ["WORKERS", "TOKIO_WORKER_THREADS"]
        .iter()
        .find_map(|name| std::env::var(name).ok()?.trim().parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// `new_current_thread`, the workload in `block_on`.
    CurrentThread,
    /// `new_multi_thread`, the workload in `block_on` (a `#[tokio::main]` body).
    MultiThread,
    /// `new_multi_thread`, the workload in a spawned task.
    MultiThreadTask,
}

impl Flavour {
    /// Every flavour; W2 and W3 spawn their tasks anyway, and run the first two.
    pub const ALL: [Flavour; 3] = [
        Flavour::CurrentThread,
        Flavour::MultiThread,
        Flavour::MultiThreadTask,
    ];

    /// In JSON lines and in `FLAVOURS`.
    pub fn id(self) -> &'static str {
        match self {
            Flavour::CurrentThread => "current_thread",
            Flavour::MultiThread => "multi_thread",
            Flavour::MultiThreadTask => "multi_thread_task",
        }
    }

    pub fn described(self) -> String {
        match self {
            Flavour::CurrentThread => "current-thread runtime, in block_on".to_string(),
            Flavour::MultiThread => {
                format!("multi-thread runtime ({} workers), in block_on", workers())
            }
            Flavour::MultiThreadTask => {
                format!(
                    "multi-thread runtime ({} workers), in a spawned task",
                    workers()
                )
            }
        }
    }

    /// Worker threads: 0 for the current-thread runtime.
    pub fn worker_threads(self) -> usize {
        match self {
            Flavour::CurrentThread => 0,
            _ => workers(),
        }
    }

    /// A fresh runtime of this flavour, its wake-ups counted.
    pub fn runtime(self) -> Runtime {
        let mut builder = match self {
            Flavour::CurrentThread => tokio::runtime::Builder::new_current_thread(),
            _ => {
                let mut builder = tokio::runtime::Builder::new_multi_thread();
                builder.worker_threads(workers());
                builder
            }
        };
        builder
            .enable_all()
            .on_thread_unpark(|| {
                UNPARKS.fetch_add(1, Ordering::Relaxed);
            })
            .build()
            .expect("a tokio runtime")
    }

    /// Runs `work` on `runtime` as this flavour does: in `block_on`, or in a spawned task.
    pub fn run<F>(self, runtime: &Runtime, work: F) -> F::Output
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match self {
            Flavour::MultiThreadTask => runtime
                .block_on(runtime.spawn(work))
                .expect("the workload's task"),
            _ => runtime.block_on(work),
        }
    }
}

/// Shuts `runtime` down without waiting long for background tasks that are still sleeping.
pub fn shut_down(runtime: Runtime) {
    runtime.shutdown_timeout(Duration::from_secs(1));
}
