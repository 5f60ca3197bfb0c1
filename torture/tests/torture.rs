//! Short torture runs: worker processes contend for a `FencedLock` (in the second run, a
//! `RedLock<Fenced>` over five masters; in the third, a `FencedLock` on a Redis Cluster)
//! and write to a fenced resource while holders are paused past their lease and killed,
//! lock servers are restarted on their data (for the `RedLock`, a minority of masters at
//! once too; on the cluster, the lock's master fails over and its slot moves instead), and
//! pub/sub and command connections are killed. On the cluster the workers also take and
//! give back permits of a semaphore in the lock's slot between their sections. The
//! checker must find no violation, and every kind of fault must have hit.
//!
//! The long run is `cargo run --release -p redis-rlock-torture -- --seconds 600`
//! (`--mode redlock` for the `RedLock`, `--mode cluster` for the cluster).

use std::sync::Mutex;
use std::time::Duration;

use redis_rlock_torture as torture_engine;
use torture_engine::backend::Mode;
use torture_engine::faults::FaultKind;
use torture_engine::{RunConfig, WorkerCommand};

/// The name of the test below, which the workers run.
const WORKER_TEST: &str = "torture_worker";

/// The worker processes re-run this test binary with only this test: it does nothing in a
/// normal run.
#[test]
fn torture_worker() {
    if let Some(outcome) = torture_engine::worker_from_env() {
        outcome.expect("the torture worker failed");
    }
}

/// The short runs take turns: each starts its own servers and workers, and two at once
/// would only load the 2-core machine past what their timing bounds assume.
static ONE_RUN_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs 25 s of faults on `mode` and checks that nothing was violated and every kind of
/// fault hit.
fn short_run(mode: Mode) {
    let _turn = ONE_RUN_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let mut config = RunConfig::new(
        // The test harness runs the worker test alone, its output not captured.
        WorkerCommand::this_program(&[WORKER_TEST, "--exact", "--nocapture", "--test-threads=1"]),
        Duration::from_secs(25),
        3,
    );
    config.mode = mode;
    config.every_kind_at_least_once = true;
    println!("mode {}, seed {}", mode.name(), config.seed);
    let report = torture_engine::run(&config);
    println!("{report}");
    println!("{}", report.json_line());
    assert!(
        report.violations.is_empty(),
        "{} violations (seed {}): see the report above",
        report.violations.len(),
        config.seed
    );
    for &kind in mode.fault_kinds() {
        let hits = report.faults.get(&kind).map_or(0, |count| count.hit);
        assert!(hits > 0, "no {} hit", kind.name());
    }
    let paused = report.cut_off.get(&FaultKind::PauseHolder);
    assert!(
        paused.is_some_and(|holders| holders.caught > 0),
        "no holder was paused past its lease"
    );
    assert!(report.sections > 20, "too few critical sections");
    if mode.is_cluster() {
        assert!(report.permits.taken > 10, "too few permits taken");
    }
}

#[test]
fn short_torture_run_finds_no_violation_and_hits_every_fault() {
    short_run(Mode::Fenced);
}

#[test]
fn short_redlock_torture_run_with_a_minority_of_masters_down_finds_no_violation() {
    short_run(Mode::RedLock);
}

#[test]
fn short_cluster_torture_run_through_failovers_and_migrations_finds_no_violation() {
    short_run(Mode::Cluster);
}
