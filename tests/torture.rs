//! A short torture run: worker processes contend for a `FencedLock` and write to a fenced
//! resource while holders are paused past their lease and killed, the lock server is
//! restarted on its data, and its pub/sub and command connections are killed. The checker
//! must find no violation, and every kind of fault must have hit.
//!
//! The long run is `cargo run --release --example torture -- --seconds 600`.

mod support;
mod torture_engine;

use std::time::Duration;

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

#[test]
fn short_torture_run_finds_no_violation_and_hits_every_fault() {
    let mut config = RunConfig::new(
        // The test harness runs the worker test alone, its output not captured.
        WorkerCommand::this_program(&[WORKER_TEST, "--exact", "--nocapture", "--test-threads=1"]),
        Duration::from_secs(25),
        3,
    );
    config.every_kind_at_least_once = true;
    println!("seed {}", config.seed);
    let report = torture_engine::run(&config);
    println!("{report}");
    println!("{}", report.json_line());
    assert!(
        report.violations.is_empty(),
        "{} violations (seed {}): see the report above",
        report.violations.len(),
        config.seed
    );
    for kind in [
        FaultKind::PauseHolder,
        FaultKind::KillHolder,
        FaultKind::RestartLockServer,
        FaultKind::KillPubSubConnections,
        FaultKind::KillCommandConnections,
    ] {
        let hits = report.faults.get(&kind).map_or(0, |count| count.hit);
        assert!(hits > 0, "no {} hit", kind.name());
    }
    let paused = report.cut_off.get(&FaultKind::PauseHolder);
    assert!(
        paused.is_some_and(|holders| holders.caught > 0),
        "no holder was paused past its lease"
    );
    assert!(report.sections > 20, "too few critical sections");
}
