//! A worker process: takes the lock again and again and, holding it, makes fenced writes
//! to the resource, racing them against the lock's `lost()`. It reports every step on
//! stdout and stops when its stdin closes (the coordinator asked, or died).

use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::backend::{
    cluster_client, with_backend, BackendJob, HeldLock, LockBackend, PERMITS_NAME,
};
use super::clock;
use super::config::{Timing, WorkerSpec, WORKER_ENV};
use super::events::{Call, Event, EventKind, WorkerId, WriteVia};
use super::resource::{LogEntry, Resource};
use super::steps;

/// Runs this process as a worker if [`WORKER_ENV`] asks it to: `None` when it does not
/// (a normal test run), else how the worker ended.
pub fn worker_from_env() -> Option<Result<(), String>> {
    let spec = std::env::var(WORKER_ENV).ok()?;
    Some(WorkerSpec::decode(&spec).and_then(run_worker))
}

/// How often a worker tries to connect before giving up: the lock server may be in the
/// middle of a restart when a replacement worker starts.
const CONNECT_ATTEMPTS: u32 = 20;

fn run_worker(spec: WorkerSpec) -> Result<(), String> {
    let stop = Arc::new(AtomicBool::new(false));
    stop_when_stdin_closes(stop.clone());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("worker runtime: {e}"))?;
    emit(
        spec.id,
        EventKind::Started {
            pid: std::process::id(),
        },
    );
    // On a task of its own, as in a service: the lock's owner is the task.
    let work = runtime.spawn(async move {
        let resource = Resource::connect(&spec.resource_url).await?;
        let job = WorkerJob {
            spec: spec.clone(),
            stop,
            resource,
        };
        let mut last_error = String::new();
        for _ in 0..CONNECT_ATTEMPTS {
            match with_backend(spec.mode, &spec.lock_urls, &spec.timing, job.clone()).await {
                Ok(()) => {
                    emit(spec.id, EventKind::Stopped);
                    return Ok(());
                }
                Err(e) => last_error = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Err(format!(
            "worker {} could not connect: {last_error}",
            spec.id
        ))
    });
    runtime
        .block_on(work)
        .map_err(|e| format!("worker task: {e}"))?
}

/// The coordinator holds the other end of stdin: its closing, or the coordinator's death,
/// means stop.
fn stop_when_stdin_closes(stop: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        let mut ignored = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut ignored);
        stop.store(true, Ordering::Release);
    });
}

/// Prints one event line. A coordinator that went away makes this panic (broken pipe),
/// which ends the worker: nobody is listening any more.
fn emit(worker: WorkerId, kind: EventKind) {
    let event = Event {
        at: clock::now(),
        worker,
        kind,
    };
    println!("{event}");
}

#[derive(Debug, Clone)]
struct WorkerJob {
    spec: WorkerSpec,
    stop: Arc<AtomicBool>,
    resource: Resource,
}

impl BackendJob for WorkerJob {
    type Output = ();

    async fn run<B: LockBackend>(self, backend: B) {
        let spec = &self.spec;
        let seed = spec.seed ^ u64::from(spec.id).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut rng = StdRng::seed_from_u64(seed);
        let lifetime_ends = Instant::now() + spec.lifetime;
        // In `cluster` mode a permit step follows every critical section, on a client of
        // its own; without one (the cluster did not answer) the steps are left out.
        let permits = if spec.mode.is_cluster() {
            cluster_client(&spec.lock_urls, &spec.timing)
                .await
                .ok()
                .map(|client| client.semaphore(PERMITS_NAME))
        } else {
            None
        };
        let mut acquisitions = 0;
        while !self.stop.load(Ordering::Acquire) && Instant::now() < lifetime_ends {
            match steps::acquire(&backend, spec.timing.acquire_wait).await {
                (call, Ok(held)) => {
                    acquisitions += 1;
                    self.critical_section(&backend, held, acquisitions, call, &mut rng)
                        .await;
                    tokio::time::sleep(between(&mut rng, spec.timing.pause_after_unlock)).await;
                    if let Some(permits) = &permits {
                        self.permit_step(permits, &mut rng).await;
                    }
                }
                (_, Err(report)) => {
                    let failed = matches!(report, EventKind::AcquireFailed { .. });
                    emit(spec.id, report);
                    if failed {
                        // The server is down or restarting: give it a moment rather than a
                        // storm of attempts.
                        tokio::time::sleep(spec.timing.retry_delay * 2).await;
                    }
                }
            }
        }
    }
}

impl WorkerJob {
    /// Writes to the resource under `held`, stopping the moment the lock is lost, then
    /// unlocks.
    async fn critical_section<B: LockBackend>(
        &self,
        backend: &B,
        held: B::Held,
        acq: u64,
        call: Call,
        rng: &mut StdRng,
    ) {
        let id = self.spec.id;
        emit(id, steps::acquired(&held, acq, call));
        let lost = held.lost();
        // From the moment the lock is lost (a pause past the lease, Redis gone), nothing
        // more is written.
        let lost_reason = tokio::select! {
            () = self.write_all(backend, &held, acq, rng) => None,
            reason = lost => Some(reason),
        };
        emit(id, steps::section_end(&held, acq, lost_reason));
        if lost_reason.is_some() {
            // What a holder paused between its last look at the lock and its write would
            // send anyway: the resource must refuse it once a newer holder has written.
            let entry = LogEntry {
                token: held.token(),
                worker: id,
                acq,
                seq: self.spec.timing.writes_per_section,
            };
            let write = steps::write(&self.resource, &held, entry, WriteVia::Logged, true);
            emit(id, write.await);
        }
        emit(id, steps::unlock(held, acq).await);
    }

    /// Takes one permit of the semaphore (waiting as long as an acquire of the lock may),
    /// keeps it for a section's work between two writes, and gives it back, reporting each
    /// step: the checker counts the permits held at once and those left at the end.
    async fn permit_step(&self, permits: &redis_rlock::Semaphore, rng: &mut StdRng) {
        let id = self.spec.id;
        let timing = &self.spec.timing;
        emit(id, EventKind::PermitAcquiring);
        let (call, taken) = steps::timed(permits.try_acquire_for(1, timing.acquire_wait)).await;
        match taken {
            Ok(Some(guard)) => {
                emit(id, EventKind::PermitTaken { call });
                tokio::time::sleep(between(rng, timing.work_between_writes)).await;
                emit(id, EventKind::PermitReleasing);
                let (call, released) = steps::timed(guard.release()).await;
                let error = released.err().map(|e| e.to_string());
                emit(id, EventKind::PermitReleased { call, error });
            }
            Ok(None) => emit(id, EventKind::PermitTimedOut { call }),
            Err(e) => emit(
                id,
                EventKind::PermitAcquireFailed {
                    call,
                    error: e.to_string(),
                },
            ),
        }
    }

    /// The section's writes; in one section of [`REENTER_ONE_IN`], halfway through, the
    /// worker also takes the lock again (a nested section) and keeps the inner guard until
    /// the last write: a re-entry after the lock left Redis must tell the outer guard it
    /// was lost, never join it (the `force_unlock` fault).
    async fn write_all<B: LockBackend>(
        &self,
        backend: &B,
        held: &B::Held,
        acq: u64,
        rng: &mut StdRng,
    ) {
        let timing: &Timing = &self.spec.timing;
        let reenter_at = rng
            .random_ratio(1, REENTER_ONE_IN)
            .then_some(timing.writes_per_section / 2);
        let mut inner = None;
        let long =
            timing.long_section_one_in > 0 && rng.random_ratio(1, timing.long_section_one_in);
        let work = if long {
            timing.long_work_between_writes
        } else {
            timing.work_between_writes
        };
        for seq in 0..timing.writes_per_section {
            if reenter_at == Some(seq) {
                let (event, guard) = steps::reenter(backend, held, acq, timing.acquire_wait).await;
                emit(self.spec.id, event);
                inner = guard;
            }
            tokio::time::sleep(between(rng, work)).await;
            let entry = LogEntry {
                token: held.token(),
                worker: self.spec.id,
                acq,
                seq,
            };
            // Both paths share one fence, so either may refuse a stale token.
            let via = if seq % 2 == 0 {
                WriteVia::Logged
            } else {
                WriteVia::Library
            };
            emit(
                self.spec.id,
                steps::write(&self.resource, held, entry, via, false).await,
            );
        }
        if let Some(inner) = inner {
            // Its outcome tells nothing the outer guard's unlock does not.
            let _ = inner.unlock().await;
        }
    }
}

/// One section in this many re-enters the lock halfway (see `write_all`).
const REENTER_ONE_IN: u32 = 2;

/// A random duration in `range` (inclusive).
fn between(rng: &mut StdRng, (low, high): (Duration, Duration)) -> Duration {
    if high <= low {
        return low;
    }
    rng.random_range(low..=high)
}
