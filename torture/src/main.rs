//! The long torture run: worker processes contend for a `FencedLock` (or, with `--mode
//! redlock`, a `RedLock<Fenced>` over five masters; with `--mode cluster`, a `FencedLock`
//! on a Redis Cluster of three masters and three replicas) and write to a fenced resource
//! while a fault schedule pauses and kills holders, restarts lock servers (a minority of
//! masters at once, for the `RedLock`; on the cluster, fails the lock's master over and
//! moves its slot instead) and kills their connections; then a checker looks for stale
//! writes, holders not told of a lost lock, calls that hung and a lock that could not be
//! taken again.
//!
//! ```sh
//! cargo run --release -p redis-rlock-torture -- --seconds 600 [--mode fenced|redlock|cluster]
//!     [--workers 4] [--seed N] [--lease-ms 1000] [--quiet]
//! ```
//!
//! Needs `redis-server` and `redis-cli` on `PATH`; starts its own servers on free loopback
//! ports. Prints a summary table and one `TORTURE_SUMMARY {...}` JSON line; exits with
//! status 1 if any violation was found. `--worker` is how it starts its own workers.

use std::process::ExitCode;
use std::time::Duration;

use redis_rlock_torture as torture_engine;
use torture_engine::{RunConfig, WorkerCommand};

const USAGE: &str = "usage: torture [--mode fenced|redlock|cluster] [--seconds N] [--workers N] \
                     [--seed N] [--lease-ms N] [--quiet]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--worker") {
        return match torture_engine::worker_from_env() {
            Some(Ok(())) => ExitCode::SUCCESS,
            Some(Err(e)) => {
                eprintln!("{e}");
                ExitCode::FAILURE
            }
            None => {
                eprintln!("--worker is for the workers this program starts itself");
                ExitCode::FAILURE
            }
        };
    }
    let config = match parse(&args) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("{e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    eprintln!(
        "torture run: mode {}, {} s of faults, {} workers, seed {}",
        config.mode.name(),
        config.duration.as_secs(),
        config.workers,
        config.seed
    );
    let report = torture_engine::run(&config);
    println!("{report}");
    println!("{}", report.json_line());
    if report.violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn parse(args: &[String]) -> Result<RunConfig, String> {
    let mut config = RunConfig::new(
        WorkerCommand::this_program(&["--worker"]),
        Duration::from_secs(600),
        4,
    );
    config.verbose = true;
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| format!("{flag} needs a value"))?
                .parse::<u64>()
                .map_err(|e| format!("{flag}: {e}"))
        };
        if flag == "--mode" {
            let mode = args.next().ok_or("--mode needs a value")?;
            config.mode = torture_engine::backend::Mode::parse(mode)?;
            continue;
        }
        match flag.as_str() {
            "--seconds" => config.duration = Duration::from_secs(value()?),
            "--workers" => {
                config.workers = usize::try_from(value()?).map_err(|e| e.to_string())?;
                if config.workers < 2 {
                    return Err(
                        "--workers must be at least 2: one to pause, one to take over".into(),
                    );
                }
            }
            "--seed" => config.seed = value()?,
            "--lease-ms" => config.set_lease(Duration::from_millis(value()?.max(100))),
            "--quiet" => config.verbose = false,
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(config)
}
