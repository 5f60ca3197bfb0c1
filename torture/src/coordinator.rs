//! The coordinator: starts the servers and the workers, injects faults on a schedule,
//! stops everything, takes the lock one last time, and hands it all to the checker.

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::backend::{
    cluster_client, with_backend, BackendJob, HeldLock, LockBackend, PERMITS, PERMITS_NAME,
};
use super::checker::{check, CheckInput, PermitsAtEnd};
use super::clock;
use super::config::{Bounds, RunConfig, WorkerSpec};
use super::events::{Call, Event, EventKind, WriteVia, COORDINATOR};
use super::faults::{inject, Fault, FaultSchedule, Target};
use super::fleet::Fleet;
use super::resource::{read_log, LogEntry, Resource};
use super::steps;
use super::summary::Report;
use testkit::{RedisCluster, RedisServer};

/// The lock servers keep every write on disk before answering, so that the lock, its
/// lease and the token counter survive a crash: the persistence the fencing guarantee
/// assumes (README, "Fencing tokens").
const LOCK_SERVER_ARGS: [&str; 4] = ["--appendonly", "yes", "--appendfsync", "always"];

/// Runs one torture run and returns its report; the caller decides what a violation means
/// (the test fails, the example exits non-zero).
pub fn run(config: &RunConfig) -> Report {
    let bounds = Bounds::of(&config.timing);
    let started = Instant::now();
    let mut lock_servers: Vec<RedisServer> = (0..config.mode.lock_servers())
        .map(|_| RedisServer::start_with_args(&LOCK_SERVER_ARGS))
        .collect();
    // No persistence: no cluster node restarts in a run (see `Mode::fault_kinds`).
    let cluster = config.mode.is_cluster().then(RedisCluster::start);
    let lock_urls = match &cluster {
        Some(cluster) => cluster.seeds(),
        None => lock_servers.iter().map(RedisServer::url).collect(),
    };
    let resource_server = RedisServer::start();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("the coordinator's runtime");
    // The permit steps' semaphore, before any worker takes from it.
    let permits_set = cluster
        .as_ref()
        .map(|cluster| runtime.block_on(set_permits(&cluster.seeds(), &config.timing)));
    let template = WorkerSpec {
        id: 0,
        mode: config.mode,
        lock_urls,
        resource_url: resource_server.url(),
        seed: config.seed,
        // Workers stop when told; this only bounds a worker nobody tells.
        lifetime: config.duration * 3 + Duration::from_secs(300),
        timing: config.timing.clone(),
    };
    let mut fleet = Fleet::start(
        config.worker_command.clone(),
        template.clone(),
        config.workers,
    );
    // The first fault needs someone holding the lock.
    fleet.wait_until(bounds.reacquire, |live| live.last_acquired_at.is_some());

    let faults = inject_faults(
        config,
        &bounds,
        &mut fleet,
        &mut lock_servers,
        cluster.as_ref(),
        &template,
    );

    let stop_requested = clock::now();
    let exits = fleet.stop(bounds.worker_exit);
    let (mut events, garbled) = fleet.into_events();
    events.extend(runtime.block_on(last_acquisition(&template, &bounds)));
    let permits = permits_set.map(|set| PermitsAtEnd {
        total: PERMITS,
        available: set
            .and_then(|()| runtime.block_on(permits_left(&template.lock_urls, &config.timing))),
    });
    let log = runtime
        .block_on(read_log(&template.resource_url))
        .unwrap_or_else(|e| vec![Err(e)]);
    let verdict = check(&CheckInput {
        events: &events,
        garbled: &garbled,
        faults: &faults,
        log: &log,
        exits: &exits,
        stop_requested,
        bounds: &bounds,
        lease: config.timing.lease,
        permits: permits.as_ref(),
    });
    Report::new(
        config,
        started.elapsed(),
        &events,
        &faults,
        log.len(),
        verdict,
    )
}

/// Injects faults until the run's time is up (and, if asked, every kind has hit), waiting
/// after each until the lock was taken again.
fn inject_faults(
    config: &RunConfig,
    bounds: &Bounds,
    fleet: &mut Fleet,
    lock_servers: &mut [RedisServer],
    cluster: Option<&RedisCluster>,
    spec: &WorkerSpec,
) -> Vec<Fault> {
    let mut rng = StdRng::seed_from_u64(config.seed);
    let mut schedule = FaultSchedule::new(config.mode.fault_kinds());
    let began = Instant::now();
    let mut faults = Vec::new();
    loop {
        let elapsed = began.elapsed();
        let more_needed = config.every_kind_at_least_once && !schedule.every_kind_hit();
        if elapsed >= config.duration && !(more_needed && elapsed < config.duration * 3) {
            break;
        }
        let (low, high) = config.between_faults;
        std::thread::sleep(rng.random_range(low..=high));
        let kind = schedule.next(&mut rng);
        let mut target = Target {
            fleet,
            lock_servers,
            cluster,
            pauses: config.pauses,
            outages: config.outages,
            tolerated_down: config.mode.tolerated_down(),
            spec,
        };
        let fault = inject(kind, &mut target, &mut rng);
        schedule.record(kind, fault.as_ref());
        let Some(fault) = fault else { continue };
        if config.verbose {
            eprintln!(
                "[{:>6.1} s] {} ({}){}",
                began.elapsed().as_secs_f64(),
                fault.kind.name(),
                fault.detail,
                if fault.hit { "" } else { ": missed" }
            );
        }
        // Recovery before the next fault: faults one after another in a broken system
        // would only blur which of them broke it.
        let ended = fault.ended;
        fleet.wait_until(bounds.reacquire, |live| {
            live.last_acquired_at.is_some_and(|at| at >= ended)
        });
        faults.push(fault);
    }
    faults
}

/// Sets the permit steps' semaphore to [`PERMITS`] (`cluster` mode).
async fn set_permits(seeds: &[String], timing: &super::config::Timing) -> Result<(), String> {
    let client = cluster_client(seeds, timing)
        .await
        .map_err(|e| e.to_string())?;
    match client
        .semaphore(PERMITS_NAME)
        .try_set_permits(PERMITS)
        .await
    {
        Ok(true) => Ok(()),
        Ok(false) => Err("the semaphore was set already".to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// The free permits of the permit steps' semaphore once the workers are gone.
async fn permits_left(seeds: &[String], timing: &super::config::Timing) -> Result<u64, String> {
    let client = cluster_client(seeds, timing)
        .await
        .map_err(|e| e.to_string())?;
    client
        .semaphore(PERMITS_NAME)
        .available_permits()
        .await
        .map_err(|e| e.to_string())
}

/// The coordinator takes the lock once all workers are gone, writes with its token and
/// releases: reported as events of its own, checked like a worker's.
async fn last_acquisition(template: &WorkerSpec, bounds: &Bounds) -> Vec<Event> {
    let resource = match Resource::connect(&template.resource_url).await {
        Ok(resource) => resource,
        Err(error) => return vec![failure(error)],
    };
    let job = LastAcquisition {
        resource,
        wait: bounds.reacquire,
    };
    with_backend(template.mode, &template.lock_urls, &template.timing, job)
        .await
        .unwrap_or_else(|e| vec![failure(e.to_string())])
}

fn failure(error: String) -> Event {
    let now = clock::now();
    Event {
        at: now,
        worker: COORDINATOR,
        kind: EventKind::AcquireFailed {
            call: Call {
                began: now,
                took: 0,
            },
            error,
        },
    }
}

struct LastAcquisition {
    resource: Resource,
    wait: Duration,
}

impl BackendJob for LastAcquisition {
    type Output = Vec<Event>;

    async fn run<B: LockBackend>(self, backend: B) -> Vec<Event> {
        let mut events = Vec::new();
        // Stamped as they happen, like a worker's lines.
        let mut report = |kind| {
            events.push(Event {
                at: clock::now(),
                worker: COORDINATOR,
                kind,
            })
        };
        let acq = 1;
        match steps::acquire(&backend, self.wait).await {
            (_, Err(failure)) => report(failure),
            (call, Ok(held)) => {
                report(steps::acquired(&held, acq, call));
                let entry = LogEntry {
                    token: held.token(),
                    worker: COORDINATOR,
                    acq,
                    seq: 0,
                };
                report(steps::write(&self.resource, &held, entry, WriteVia::Logged, false).await);
                report(steps::section_end(&held, acq, None));
                report(steps::unlock(held, acq).await);
            }
        }
        events
    }
}
